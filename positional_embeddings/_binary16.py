"""IEEE binary16 (float16) conversions for the compiled loops.

Numba has no CPU float16, so float16 arrays travel as their 16-bit patterns
and the loops convert element by element: ``f16_bits_to_f32`` (exact),
``f32_to_f16_bits`` and ``f64_to_f16_bits`` (round to nearest, ties to
even, in one rounding), ``round_f16`` (a float32 rounded to float16).

Where the CPU Numba compiles for converts in hardware (``native_binary16``:
x86-64 with F16C, 64-bit Arm), they are LLVM's ``fpext``/``fptrunc`` to
and from ``half``, which vectorise.  Elsewhere they are integer code with
the same results, NaNs included: a NaN comes out quiet, with its sign and
the leading bits of its payload, as F16C's ``vcvtph2ps``/``vcvtps2ph``,
Arm's ``fcvt`` and Julia's own software conversions
(``runtime_intrinsics.c``) give them.  (LLVM may drop a conversion there
and back in the hardware form, which leaves a signalling NaN signalling:
only NaNs' positions are part of the results' promise, as for any dtype.)

On a CPU without those instructions, LLVM makes a ``half`` conversion a
call of a library function that Numba's linker does not have, and the
process aborts.  So the choice is made when a function using them is
compiled, by LLVM itself: it compiles the two conversions for the CPU name
and features Numba's own code generator uses (``NUMBA_CPU_NAME``,
``NUMBA_CPU_FEATURES``, ``NUMBA_ENABLE_AVX`` or the host's), whose
implications only LLVM knows (``-avx`` turns F16C off), and the
instructions are used where no such call appears.  Those are the target
Numba keys its cache by, so cached code is never loaded where its choice
would differ.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import types
from numba.extending import intrinsic, overload

from ._jit import JIT, JIT_LLVM_INLINED
from ._julia_math import f32_bits, f32_from_bits

__all__ = [
    "converts_in_hardware",
    "f16_bits_to_f32",
    "f16_bits_to_f32_software",
    "f32_to_f16_bits",
    "f32_to_f16_bits_software",
    "f64_to_f16_bits",
    "native_binary16",
    "round_f16",
]


_ARCHITECTURES = ("x86_64", "aarch64", "arm64")
"""LLVM's names (in target triples) of the architectures whose binary16
instructions are used: x86-64 (with F16C) and 64-bit Arm (Linux, macOS)."""

_HALF_CONVERSIONS = """
define i16 @encode(float %x) {
  %h = fptrunc float %x to half
  %b = bitcast half %h to i16
  ret i16 %b
}
define float @decode(i16 %b) {
  %h = bitcast i16 %b to half
  %f = fpext half %h to float
  ret float %f
}
"""
"""The two conversions, as LLVM IR."""

_LIBRARY_CONVERSIONS = ("sfhf2", "hfsf2", "f2h", "h2f")
"""Parts of the names of the library functions LLVM calls for them
(``__truncsfhf2``, ``__extendhfsf2``, ``__gnu_f2h_ieee``, ``__aeabi_h2f``...)."""


def converts_in_hardware(triple: str, cpu: str, features: str) -> bool:
    """Whether LLVM compiles ``half`` conversions to instructions, not calls,
    for ``cpu`` with ``features`` (an LLVM feature string) on ``triple``, an
    architecture of ``_ARCHITECTURES``."""
    if triple.split("-")[0] not in _ARCHITECTURES:
        return False
    machine = binding.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features)
    module = binding.parse_assembly(_HALF_CONVERSIONS)
    module.triple = triple
    assembly = machine.emit_assembly(module)
    return not any(name in assembly for name in _LIBRARY_CONVERSIONS)


@functools.cache
def native_binary16() -> bool:
    """Whether the conversions are the instructions of the CPU Numba compiles
    for (see the module's notes); asked once per process, at the first
    compilation that needs it."""
    from numba.core.registry import cpu_target

    triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    return converts_in_hardware(triple, cpu, features)


@intrinsic
def _fpext_half(typingctx, bits):  # type: ignore[no-untyped-def]
    """binary16 bits (uint16) to float32: LLVM's ``fpext half to float``."""
    if bits != types.uint16:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _fptrunc_half(typingctx, value):  # type: ignore[no-untyped-def]
    """float32 to binary16 bits (uint16): LLVM's ``fptrunc float to half``."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@numba.njit(**JIT)
def f16_bits_to_f32_software(bits: int) -> float:
    """Decode binary16 bits into the (exactly equal) float32, in integer code."""
    h = np.uint32(bits)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exponent = (h >> np.uint32(10)) & np.uint32(0x1F)
    mantissa = h & np.uint32(0x3FF)
    if exponent == 0x1F:  # Inf, or NaN made quiet
        quiet = np.uint32(0x400000) if mantissa else np.uint32(0)
        return f32_from_bits(sign | np.uint32(0x7F800000) | quiet | (mantissa << np.uint32(13)))
    if exponent == 0:
        magnitude = np.float32(mantissa) * np.float32(2.0**-24)
        return -magnitude if sign else magnitude
    return f32_from_bits(
        sign | ((exponent + np.uint32(112)) << np.uint32(23)) | (mantissa << np.uint32(13))
    )


@numba.njit(**JIT)
def f32_to_f16_bits_software(value: float) -> int:
    """Round a float32 to the nearest binary16 (ties to even), in integer
    code; return its bits."""
    u = f32_bits(np.float32(value))
    sign = np.uint16((u >> np.uint32(16)) & np.uint32(0x8000))
    a = u & np.uint32(0x7FFFFFFF)
    if a > 0x7F800000:  # NaN: made quiet, the payload's leading bits kept
        return sign | np.uint16(0x7E00 | ((a >> np.uint32(13)) & np.uint32(0x3FF)))
    if a >= 0x477FF000:  # 65520 and above (Inf included) round to Inf
        return sign | np.uint16(0x7C00)
    if a >= 0x38800000:  # a normal binary16 (2**-14 and above)
        h = (a - np.uint32(0x38000000)) >> np.uint32(13)
        rest = a & np.uint32(0x1FFF)
        if rest > 0x1000 or (rest == 0x1000 and (h & 1)):
            h += 1
        return sign | np.uint16(h)
    if a < 0x33000000:  # below 2**-25: rounds to zero
        return sign
    shift = np.uint32(126) - (a >> np.uint32(23))
    mantissa = (a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
    h = mantissa >> shift
    rest = mantissa & ((np.uint32(1) << shift) - np.uint32(1))
    half = np.uint32(1) << (shift - np.uint32(1))
    if rest > half or (rest == half and (h & 1)):
        h += 1
    return sign | np.uint16(h)


def _decode(value):  # type: ignore[no-untyped-def]
    """binary16 bits (uint16) to float32, in the form ``native_binary16`` chooses."""


def _encode(value):  # type: ignore[no-untyped-def]
    """float32 to binary16 bits (uint16), in the form ``native_binary16`` chooses."""


def _in_chosen_form(hardware, software):  # type: ignore[no-untyped-def]
    """An overload of a conversion: ``hardware`` (an intrinsic) where
    ``native_binary16``, else ``software`` (integer code)."""

    def choose(value):  # type: ignore[no-untyped-def]
        if native_binary16():
            return lambda value: hardware(value)
        return lambda value: software(value)

    return choose


overload(_decode, jit_options=JIT)(_in_chosen_form(_fpext_half, f16_bits_to_f32_software))
overload(_encode, jit_options=JIT)(_in_chosen_form(_fptrunc_half, f32_to_f16_bits_software))


@numba.njit(**JIT_LLVM_INLINED)
def f16_bits_to_f32(bits: int) -> float:
    """Decode binary16 bits into the (exactly equal) float32."""
    return _decode(np.uint16(bits))


@numba.njit(**JIT_LLVM_INLINED)
def f32_to_f16_bits(value: float) -> int:
    """Round a float32 to the nearest binary16 (ties to even); return its bits."""
    return _encode(np.float32(value))


@numba.njit(**JIT_LLVM_INLINED)
def f64_to_f16_bits(value: float) -> int:
    """Round a float64 to the nearest binary16 (ties to even), in one rounding.

    Julia's ``Float16(::Float64)``.  Going through float32 could round twice;
    rounding to float32 "to odd" first keeps the second rounding exact.
    Written without branches, so that loops over it vectorise.
    """
    single = np.float32(value)
    near = np.float64(single)
    inexact = (near != value) & math.isfinite(value)
    away = inexact & (abs(near) > abs(value))  # RNE went away from zero: truncate
    odd = (f32_bits(single) - np.uint32(away)) | np.uint32(inexact)
    return f32_to_f16_bits(f32_from_bits(odd))


@numba.njit(**JIT_LLVM_INLINED)
def round_f16(value: float) -> float:
    """A float32 rounded to the nearest binary16 value, kept as float32."""
    return f16_bits_to_f32(f32_to_f16_bits(value))
