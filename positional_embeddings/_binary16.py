"""IEEE binary16 (float16) conversions for the compiled loops.

Numba has no CPU float16, so float16 arrays travel as their 16-bit patterns
and the loops convert element by element: ``f16_bits_to_f32`` (exact),
``f32_to_f16_bits`` and ``f64_to_f16_bits`` (round to nearest, ties to
even, in one rounding), ``round_f16`` (a float32 rounded to float16).

On a target that converts in hardware (``NATIVE_BINARY16``: x86-64 with
F16C, 64-bit Arm), they are LLVM's ``fpext``/``fptrunc`` to and from
``half``, which vectorise.  Elsewhere they are integer code with the same
results, NaNs included: a NaN comes out quiet, with its sign and the
leading bits of its payload, as F16C's ``vcvtph2ps``/``vcvtps2ph``, Arm's
``fcvt`` and Julia's own software conversions (``runtime_intrinsics.c``)
give them.  LLVM lowers a ``half``
conversion on a target without those instructions to a library call that
Numba's linker does not have, so the choice is made before compiling, from
the features Numba compiles for (``NUMBA_CPU_FEATURES``, or the host's);
they are part of the key of Numba's cache, so a cached loop is never loaded
on a machine it was not compiled for.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import config, types
from numba.extending import intrinsic

from ._jit import JIT, JIT_LLVM_INLINED
from ._julia_math import f32_bits, f32_from_bits

__all__ = [
    "NATIVE_BINARY16",
    "f16_bits_to_f32",
    "f16_bits_to_f32_software",
    "f32_to_f16_bits",
    "f32_to_f16_bits_software",
    "f64_to_f16_bits",
    "round_f16",
]


_ARM64 = ("aarch64", "arm64")
"""LLVM's names of 64-bit Arm in target triples (Linux, macOS)."""


def _native_binary16() -> bool:
    """Whether Numba compiles for 64-bit Arm (whose base instruction set
    converts binary16) or x86-64 with F16C (the last ``+f16c`` or ``-f16c``
    of ``NUMBA_CPU_FEATURES`` decides, or else the host's)."""
    architecture = binding.get_process_triple().split("-")[0]
    if architecture in _ARM64:
        return True
    if architecture != "x86_64":
        return False
    features = getattr(config, "CPU_FEATURES", None)  # set by Numba's reading of its variables
    if features is None:
        features = binding.get_host_cpu_features().flatten()
    flags = [flag for flag in features.split(",") if flag in ("+f16c", "-f16c")]
    return bool(flags) and flags[-1] == "+f16c"


NATIVE_BINARY16 = _native_binary16()
"""Whether the conversions are the target's instructions (see the module's notes)."""


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


_decode: Any = _fpext_half if NATIVE_BINARY16 else f16_bits_to_f32_software
_encode: Any = _fptrunc_half if NATIVE_BINARY16 else f32_to_f16_bits_software


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
