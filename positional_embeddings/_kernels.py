"""Every compiled loop over arrays: the forward passes and the table builders.

Nothing here validates or allocates user-visible arrays: the callers in
``rope.py``, ``absolute.py`` and ``frequencies.py`` check arguments, allocate
outputs in the input's memory order, and hand 3-D views to these loops.

Compile flags come from ``_JIT`` alone: ``cache=True`` so a second process
starts without compiling, and never ``fastmath`` (it allows fused
multiply-adds and reassociation, which Julia does not do, and would break
bit parity).

Element arithmetic follows Julia's promotion rules exactly, through a few
small type-dispatched helpers (numba ``overload``s) that the loops share:

- ``_load``: float16 arrays travel as ``F16_RECORD`` views (Numba has no CPU
  float16) and are decoded to float32, which is exact.
- ``_cvt``: a value in the output's arithmetic type.  Float16 outputs travel
  as uint16 views; their arithmetic is float32 rounded back to float16 after
  every operation, which is what Julia does for ``Float16`` (and is correctly
  rounded, since 24 >= 2*11 + 2).
- ``_neg``: negation in the input's own type, as Julia's ``neg_half`` does
  before any promotion (``-false == 0`` is a +0, ``-typemin(Int8)`` wraps).
- ``_mul``/``_add``: Julia's ``Bool * Float`` (``false`` is a strong zero:
  ``copysign(0, y)``) and ``Bool + Float`` (``ifelse(x, 1 + y, y)``).
- ``_store``: back to the output's storage type.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from ._julia_math import pow_f64, sincos_f32, sincos_f64
from ._parallel import run_ranges

__all__ = [
    "F16_RECORD",
    "absolute_forward",
    "absolute_table",
    "inverse_frequencies",
    "rope_forward",
    "rope_tables",
]

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}

_SINCOS_COST = 256
"""One sin/cos evaluation, in bytes of memory traffic that take as long (for
``run_ranges``'s threshold): ~20 ns against ~12 GB/s."""

F16_RECORD = np.dtype([("bits", "<u2")])
"""How float16 arrays are passed to kernels: the same bytes under a record dtype."""


@intrinsic
def _f32_as_u32(typingctx, value):  # type: ignore[no-untyped-def]
    """Reinterpret a float32's bits as a uint32."""
    signature = types.uint32(types.float32)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.IntType(32))

    return signature, codegen


@intrinsic
def _u32_as_f32(typingctx, value):  # type: ignore[no-untyped-def]
    """Reinterpret a uint32's bits as a float32."""
    signature = types.float32(types.uint32)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.FloatType())

    return signature, codegen


@numba.njit(**_JIT)
def f16_bits_to_f32(bits: int) -> float:
    """Decode IEEE binary16 bits into the (exactly equal) float32."""
    h = np.uint32(bits)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exponent = (h >> np.uint32(10)) & np.uint32(0x1F)
    mantissa = h & np.uint32(0x3FF)
    if exponent == 0x1F:
        return _u32_as_f32(sign | np.uint32(0x7F800000) | (mantissa << np.uint32(13)))
    if exponent == 0:
        magnitude = np.float32(mantissa) * np.float32(2.0**-24)
        return -magnitude if sign else magnitude
    return _u32_as_f32(
        sign | ((exponent + np.uint32(112)) << np.uint32(23)) | (mantissa << np.uint32(13))
    )


@numba.njit(**_JIT)
def f32_to_f16_bits(value: float) -> int:
    """Round a float32 to the nearest binary16 (ties to even); return its bits."""
    u = _f32_as_u32(np.float32(value))
    sign = np.uint16((u >> np.uint32(16)) & np.uint32(0x8000))
    a = u & np.uint32(0x7FFFFFFF)
    if a >= 0x7F800000:  # Inf or NaN (NaN stays quiet)
        return sign | np.uint16(0x7C00 | (0x200 if a > 0x7F800000 else 0))
    if a >= 0x477FF000:  # 65520 and above round to Inf
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


@numba.njit(**_JIT)
def f64_to_f16_bits(value: float) -> int:
    """Round a float64 to the nearest binary16 (ties to even), in one rounding.

    Julia's ``Float16(::Float64)``.  Going through float32 could round twice;
    rounding to float32 "to odd" first keeps the second rounding exact.
    """
    single = np.float32(value)
    if math.isfinite(value) and np.float64(single) != value:
        if abs(np.float64(single)) > abs(value):  # RNE went away from zero: truncate
            single = _u32_as_f32(_f32_as_u32(single) - np.uint32(1))
        single = _u32_as_f32(_f32_as_u32(single) | np.uint32(1))
    return f32_to_f16_bits(single)


@numba.njit(**_JIT)
def _round_f16(value: float) -> float:
    """A float32 rounded to the nearest binary16 value, kept as float32."""
    return f16_bits_to_f32(f32_to_f16_bits(value))


def _load(value):  # type: ignore[no-untyped-def]
    """An array element as a number (float16 records become float32)."""


@overload(_load, jit_options=_JIT)
def _ov_load(value):  # type: ignore[no-untyped-def]
    if isinstance(value, types.Record):
        return lambda value: f16_bits_to_f32(value.bits)
    return lambda value: value


def _neg(value):  # type: ignore[no-untyped-def]
    """``-value`` in the value's own type, as Julia's ``neg_half`` negates."""


@overload(_neg, jit_options=_JIT)
def _ov_neg(value):  # type: ignore[no-untyped-def]
    if isinstance(value, types.Boolean):
        return lambda value: -np.int64(value)
    if isinstance(value, types.Integer):
        own = value

        def negate_integer(value):  # type: ignore[no-untyped-def]
            return own(-value)

        return negate_integer
    return lambda value: -value


def _cvt(value, out):  # type: ignore[no-untyped-def]
    """``value`` converted to the arithmetic type of ``out``'s elements."""


@overload(_cvt, jit_options=_JIT)
def _ov_cvt(value, out):  # type: ignore[no-untyped-def]
    if out.dtype == types.uint16:
        return lambda value, out: _round_f16(np.float32(value))
    if out.dtype == types.float32:
        return lambda value, out: np.float32(value)
    return lambda value, out: np.float64(value)


def _rnd(value, out):  # type: ignore[no-untyped-def]
    """Round an arithmetic result to ``out``'s precision (only float16 needs it)."""


@overload(_rnd, jit_options=_JIT)
def _ov_rnd(value, out):  # type: ignore[no-untyped-def]
    if out.dtype == types.uint16:
        return lambda value, out: _round_f16(value)
    return lambda value, out: value


def _store(value, out):  # type: ignore[no-untyped-def]
    """A result in ``out``'s storage type (float16 bits for uint16 views)."""


@overload(_store, jit_options=_JIT)
def _ov_store(value, out):  # type: ignore[no-untyped-def]
    if out.dtype == types.uint16:
        return lambda value, out: f32_to_f16_bits(value)
    return lambda value, out: value


def _mul(a, b, out):  # type: ignore[no-untyped-def]
    """Julia's ``a * b`` promoted to ``out``'s type (``b`` is a float)."""


@overload(_mul, jit_options=_JIT)
def _ov_mul(a, b, out):  # type: ignore[no-untyped-def]
    if isinstance(a, types.Boolean):

        def strong_zero(a, b, out):  # type: ignore[no-untyped-def]
            y = _cvt(b, out)
            return y if a else _cvt(math.copysign(0.0, y), out)

        return strong_zero
    return lambda a, b, out: _rnd(_cvt(a, out) * _cvt(b, out), out)


def _add(a, b, out):  # type: ignore[no-untyped-def]
    """Julia's ``a + b`` promoted to ``out``'s type (``b`` is a float)."""


@overload(_add, jit_options=_JIT)
def _ov_add(a, b, out):  # type: ignore[no-untyped-def]
    if isinstance(a, types.Boolean):
        return lambda a, b, out: (
            _rnd(_cvt(1.0, out) + _cvt(b, out), out) if a else _cvt(b, out)
        )
    return lambda a, b, out: _rnd(_cvt(a, out) + _cvt(b, out), out)


@numba.njit(**_JIT)
def _rotate(x1, x2, c1, s1, c2, s2, out):  # type: ignore[no-untyped-def]
    """One RoPE pair, exactly Julia's ``x .* cos + neg_half(x) .* sin``.

    ``x1`` is row h and ``x2`` row h + H/2: ``neg_half`` gives ``-x2`` for row
    h and ``x1`` for row h + H/2.  Two rounded products and a rounded sum, no
    fused multiply-add.  Both inputs are read before either output is written
    by the callers, so ``out`` may be ``x``.
    """
    y1 = _rnd(_mul(x1, c1, out) + _mul(_neg(x2), s1, out), out)
    y2 = _rnd(_mul(x2, c2, out) + _mul(x1, s2, out), out)
    return _store(y1, out), _store(y2, out)


@numba.njit(**_JIT)
def _rope_inner_head(x, cos, sin, out, start, stop):  # type: ignore[no-untyped-def]
    """RoPE with the head axis innermost (F order); outer range over (batch, seq)."""
    head, seq, _ = x.shape
    half = head // 2
    for j in range(start, stop):
        b, s = divmod(j, seq)
        for h in range(half):
            out[h, s, b], out[h + half, s, b] = _rotate(
                _load(x[h, s, b]),
                _load(x[h + half, s, b]),
                cos[h, s],
                sin[h, s],
                cos[h + half, s],
                sin[h + half, s],
                out,
            )


@numba.njit(**_JIT)
def _rope_inner_batch(x, cos, sin, out, start, stop):  # type: ignore[no-untyped-def]
    """RoPE with the batch axis innermost (C order); outer range over head pairs."""
    head, seq, batch = x.shape
    half = head // 2
    for h in range(start, stop):
        for s in range(seq):
            c1 = cos[h, s]
            s1 = sin[h, s]
            c2 = cos[h + half, s]
            s2 = sin[h + half, s]
            for b in range(batch):
                out[h, s, b], out[h + half, s, b] = _rotate(
                    _load(x[h, s, b]), _load(x[h + half, s, b]), c1, s1, c2, s2, out
                )


def _inner_batch(x: np.ndarray) -> bool:
    """Whether the batch axis (2) has a smaller stride than the first axis."""
    return x.shape[2] > 1 and abs(x.strides[2]) < abs(x.strides[0])


def rope_forward(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, out: np.ndarray
) -> None:
    """Rotate ``x`` (head, seq, batch) into ``out`` with tables (head, >= seq).

    ``x`` is float16 as ``F16_RECORD``, or bool/integer/float32/float64;
    ``out`` is float32/float64, or uint16 holding float16 bits.  The loop
    order follows the smaller stride of the head and batch axes; large calls
    are split over threads.
    """
    head, seq, batch = x.shape
    traffic = x.nbytes + out.nbytes
    if _inner_batch(x):
        run_ranges(_rope_inner_batch, head // 2, traffic, x, cos, sin, out)
    else:
        run_ranges(_rope_inner_head, seq * batch, traffic, x, cos, sin, out)


@numba.njit(**_JIT)
def _absolute_inner_seq(x, embeddings, out, start, stop):  # type: ignore[no-untyped-def]
    """AbsolutePE with the seq axis innermost (F order); outer range over (batch, channel)."""
    seq, channels, _ = x.shape
    for j in range(start, stop):
        b, c = divmod(j, channels)
        for s in range(seq):
            out[s, c, b] = _add(_load(x[s, c, b]), embeddings[c, s], out)


@numba.njit(**_JIT)
def _absolute_inner_batch(x, embeddings, out, start, stop):  # type: ignore[no-untyped-def]
    """AbsolutePE with the batch axis innermost (C order); outer range over (seq, channel)."""
    _, channels, batch = x.shape
    for j in range(start, stop):
        s, c = divmod(j, channels)
        e = embeddings[c, s]
        for b in range(batch):
            out[s, c, b] = _add(_load(x[s, c, b]), e, out)


def absolute_forward(x: np.ndarray, embeddings: np.ndarray, out: np.ndarray) -> None:
    """``out = x + embeddings[:, :seq].T`` over (seq, channel, batch) views."""
    seq, channels, batch = x.shape
    traffic = x.nbytes + out.nbytes
    if _inner_batch(x):
        run_ranges(_absolute_inner_batch, seq * channels, traffic, x, embeddings, out)
    else:
        run_ranges(_absolute_inner_seq, batch * channels, traffic, x, embeddings, out)


@numba.njit(**_JIT)
def inverse_frequencies(dim: int, base: float, theta: np.ndarray) -> None:
    """``theta[i] = 1 / base^((2i)/dim)``, Julia's ``1 ./ (base .^ (0:2:dim-1 ./ dim))``."""
    for i in range(theta.size):
        theta[i] = 1.0 / pow_f64(base, (2.0 * i) / dim)


def _sincos_in(angle, table):  # type: ignore[no-untyped-def]
    """Julia's ``sin(T(angle))``, ``cos(T(angle))`` in the table's storage type."""


@overload(_sincos_in, jit_options=_JIT)
def _ov_sincos_in(angle, table):  # type: ignore[no-untyped-def]
    if table.dtype == types.uint16:

        def half_precision(angle, table):  # type: ignore[no-untyped-def]
            # Julia: Float16(sin(Float32(x))) on the Float16-rounded angle.
            s, c = sincos_f32(f16_bits_to_f32(f64_to_f16_bits(angle)))
            return f32_to_f16_bits(s), f32_to_f16_bits(c)

        return half_precision
    if table.dtype == types.float32:
        return lambda angle, table: sincos_f32(np.float32(angle))
    return lambda angle, table: sincos_f64(angle)


@numba.njit(**_JIT)
def _rope_tables(theta, scale, cos, sin, start, stop):  # type: ignore[no-untyped-def]
    half = theta.size
    for p in range(start, stop):
        for i in range(half):
            s, c = _sincos_in((theta[i] * p) * scale, cos)
            cos[i, p] = c
            cos[i + half, p] = c
            sin[i, p] = s
            sin[i + half, p] = s


def rope_tables(theta: np.ndarray, scale: float, cos: np.ndarray, sin: np.ndarray) -> None:
    """Fill RoPE's (head, seq) tables: rows i and i + head/2 hold the sin/cos of
    the angle ``T((theta[i] * p) * scale)`` for position p, as Julia's
    ``T.(compute_frequencies(...) .* scale)`` stacked on itself.

    ``cos``/``sin`` are float32/float64, or uint16 for float16 bits.
    """
    cost = theta.size * cos.shape[1] * _SINCOS_COST
    run_ranges(_rope_tables, cos.shape[1], cost, theta, scale, cos, sin)


@numba.njit(**_JIT)
def _absolute_table(theta, embeddings, start, stop):  # type: ignore[no-untyped-def]
    rows = embeddings.shape[0]
    for p in range(start, stop):
        for i in range(theta.size):
            s, c = sincos_f64(theta[i] * p)
            embeddings[2 * i, p] = np.float32(s)
            if 2 * i + 1 < rows:
                embeddings[2 * i + 1, p] = np.float32(c)


def absolute_table(theta: np.ndarray, embeddings: np.ndarray) -> None:
    """Fill AbsolutePE's (embedding, length) float32 table: row 2i is
    ``Float32(sin(theta[i] * p))``, row 2i+1 ``Float32(cos(theta[i] * p))``
    (sin and cos in Float64, rounded once), the cos row omitted past the end.
    """
    cost = theta.size * embeddings.shape[1] * _SINCOS_COST
    run_ranges(_absolute_table, embeddings.shape[1], cost, theta, embeddings)
