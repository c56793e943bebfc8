"""Every compiled loop over arrays: the forward passes and the table builders.

Nothing here validates or allocates user-visible arrays: the callers in
``rope.py``, ``absolute.py`` and ``frequencies.py`` check arguments, allocate
outputs in the input's memory order, and hand 3-D views to these loops.

Compile flags come from ``_jit.JIT`` alone (cached, GIL released, IEEE
division, never ``fastmath``).

Element arithmetic follows Julia's promotion rules exactly, through a few
small type-dispatched helpers (numba ``overload``s) that the loops share:

- ``_load``: float16 arrays travel as ``F16_RECORD`` views (Numba has no CPU
  float16) and are decoded to float32, which is exact.
- ``_cvt``: a value in the output's arithmetic type.  Float16 outputs travel
  as uint16 views; their arithmetic is float32 rounded back to float16 after
  every operation, which is what Julia does for ``Float16`` (and is correctly
  rounded, since 24 >= 2*11 + 2).
- ``_neg``/``_rotated``: the elements of Julia's ``neg_half(x)``: negation in
  the input's own type before any promotion (``-false == 0`` is a +0,
  ``-typemin(Int8)`` wraps), Bool widened to Int.
- ``_mul``/``_add``: Julia's ``Bool * Float`` (``false`` is a strong zero:
  ``copysign(0, y)``) and ``Bool + Float`` (``ifelse(x, 1 + y, y)``).
- ``_store``: back to the output's storage type.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from functools import partial
from operator import itemgetter, methodcaller
from typing import Any

import llvmlite.ir as ir
import numba
import numpy as np
from numba.core import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload

from . import _parallel
from ._binary16 import f16_bits_to_f32, f32_to_f16_bits, f64_to_f16_bits, round_f16
from ._jit import JIT, JIT_INLINED, JIT_LLVM_INLINED, JIT_LOOP
from ._julia_math import (
    moderate_f32,
    moderate_f64,
    pow_f64,
    sincos_f32,
    sincos_f32_moderate,
    sincos_f64,
    sincos_f64_moderate,
)
from ._parallel import NO_POST, posted, run_ranges
from ._views import merged, on_views, viewed

__all__ = [
    "Direct",
    "absolute_direct",
    "absolute_forward",
    "absolute_ids",
    "absolute_ids_direct",
    "absolute_table",
    "alibi_bias",
    "decoding_ids",
    "exchanged",
    "gather_rows",
    "ids_run",
    "ids_within",
    "inverse_frequencies",
    "packed_tables",
    "relative_index",
    "rope_direct",
    "rope_forward",
    "rope_tables",
    "t5_bucket",
    "widened_f16",
]


_SINCOS_COST = 256
"""One sin/cos evaluation, in bytes of memory traffic that take as long (for
``run_ranges``'s threshold): ~20 ns against ~12 GB/s."""


def _load(value):  # type: ignore[no-untyped-def]
    """An array element as a number (float16 records become float32)."""


@overload(_load, jit_options=JIT)
def _ov_load(value):  # type: ignore[no-untyped-def]
    if isinstance(value, types.Record):
        return lambda value: f16_bits_to_f32(value.bits)
    return lambda value: value


def _rotated(value):  # type: ignore[no-untyped-def]
    """``value`` as an element of Julia's ``neg_half(x)``: Bool becomes Int."""


@overload(_rotated, jit_options=JIT)
def _ov_rotated(value):  # type: ignore[no-untyped-def]
    if isinstance(value, types.Boolean):
        return lambda value: np.int64(value)
    return lambda value: value


def _neg(value):  # type: ignore[no-untyped-def]
    """``-value`` in the value's own type, as Julia's ``neg_half`` negates."""


@overload(_neg, jit_options=JIT)
def _ov_neg(value):  # type: ignore[no-untyped-def]
    if isinstance(value, types.Boolean):
        return lambda value: -np.int64(value)
    if isinstance(value, types.Integer):
        own = value

        def negate_integer(value):  # type: ignore[no-untyped-def]
            return own(-value)

        return negate_integer
    return lambda value: -value


# The arithmetic helpers below take the dtype of the array a loop writes
# (``out.dtype``: float32, float64, or uint16 for float16 bits), never the
# array itself.  Numba compiles a function once for each tuple of argument
# types, and an array's type carries its dims and layout too: given ``out``,
# every new layout compiled them all again.  ``dtype`` is Numba's ``DType``
# type, whose ``.dtype`` is the element type.


def _cvt(value, dtype):  # type: ignore[no-untyped-def]
    """``value`` converted to the arithmetic type of ``dtype``'s elements."""


@overload(_cvt, jit_options=JIT)
def _ov_cvt(value, dtype):  # type: ignore[no-untyped-def]
    if dtype.dtype == types.uint16:
        return lambda value, dtype: round_f16(np.float32(value))
    if dtype.dtype == types.float32:
        return lambda value, dtype: np.float32(value)
    return lambda value, dtype: np.float64(value)


def _rnd(value, dtype):  # type: ignore[no-untyped-def]
    """Round an arithmetic result to ``dtype``'s precision (only float16 needs it)."""


@overload(_rnd, jit_options=JIT)
def _ov_rnd(value, dtype):  # type: ignore[no-untyped-def]
    if dtype.dtype == types.uint16:
        return lambda value, dtype: round_f16(value)
    return lambda value, dtype: value


def _store(value, dtype):  # type: ignore[no-untyped-def]
    """A result in ``dtype``'s storage type (float16 bits for uint16)."""


@overload(_store, jit_options=JIT)
def _ov_store(value, dtype):  # type: ignore[no-untyped-def]
    if dtype.dtype == types.uint16:
        return lambda value, dtype: f32_to_f16_bits(value)
    return lambda value, dtype: value


def _mul(a, b, dtype):  # type: ignore[no-untyped-def]
    """Julia's ``a * b`` promoted to ``dtype``'s type (``b`` is a float)."""


@overload(_mul, jit_options=JIT)
def _ov_mul(a, b, dtype):  # type: ignore[no-untyped-def]
    if isinstance(a, types.Boolean):

        def strong_zero(a, b, dtype):  # type: ignore[no-untyped-def]
            y = _cvt(b, dtype)
            return y if a else _cvt(math.copysign(0.0, y), dtype)

        return strong_zero
    return lambda a, b, dtype: _rnd(_cvt(a, dtype) * _cvt(b, dtype), dtype)


def _add(a, b, dtype):  # type: ignore[no-untyped-def]
    """Julia's ``a + b`` promoted to ``dtype``'s type (``b`` is a float)."""


@overload(_add, jit_options=JIT)
def _ov_add(a, b, dtype):  # type: ignore[no-untyped-def]
    if isinstance(a, types.Boolean):
        return lambda a, b, dtype: (
            _rnd(_cvt(1.0, dtype) + _cvt(b, dtype), dtype) if a else _cvt(b, dtype)
        )
    return lambda a, b, dtype: _rnd(_cvt(a, dtype) + _cvt(b, dtype), dtype)


def _pair(i, half, pairing):  # type: ignore[no-untyped-def]
    """Channels ``(h1, h2)`` of RoPE pair ``i`` in a head of ``2*half`` (+1) channels.

    The *type* of ``pairing`` selects the layout at compile time: an integer
    pairs ``i`` with ``i + half`` (Julia's half split); ``None`` pairs ``2i``
    with ``2i + 1`` (interleaved).  ``half`` comes from the array's shape, so
    the compiler sees the index stay in range and vectorises the loop.
    """


@overload(_pair, jit_options=JIT)
def _ov_pair(i, half, pairing):  # type: ignore[no-untyped-def]
    if isinstance(pairing, types.NoneType):
        return lambda i, half, pairing: (2 * i, 2 * i + 1)
    return lambda i, half, pairing: (i, i + half)


def _table_row(h1, h2, shared):  # type: ignore[no-untyped-def]
    """The table row holding channel ``h2``'s cos/sin: ``h1`` when the tables'
    partner rows are equal (``shared`` is True: tables built by ``RoPE``),
    else ``h2``.  The *type* of ``shared`` decides at compile time, so with
    equal rows each pair reads one row of each table instead of two."""


@overload(_table_row, jit_options=JIT)
def _ov_table_row(h1, h2, shared):  # type: ignore[no-untyped-def]
    if isinstance(shared, types.NoneType):
        return lambda h1, h2, shared: h2
    return lambda h1, h2, shared: h1


def _pair_tables(cos, sin, shared, h1, h2, p):  # type: ignore[no-untyped-def]
    """The tables' values for the pair of channels ``h1, h2`` at position
    ``p``, as ``(c1, s1, c2, s2)``.  With ``sin`` None, ``cos`` is the two
    tables in one (``packed_tables``): each pair's cos in row ``h1``, its
    sin in row ``h2``, so that a loop along the head reads one table."""


@overload(_pair_tables, jit_options=JIT)
def _ov_pair_tables(cos, sin, shared, h1, h2, p):  # type: ignore[no-untyped-def]
    if isinstance(sin, types.NoneType):

        def packed(cos, sin, shared, h1, h2, p):  # type: ignore[no-untyped-def]
            c, s = cos[h1, p], cos[h2, p]
            return c, s, c, s

        return packed

    def separate(cos, sin, shared, h1, h2, p):  # type: ignore[no-untyped-def]
        t2 = _table_row(h1, h2, shared)
        return cos[h1, p], sin[h1, p], cos[t2, p], sin[t2, p]

    return separate


def _position(positions, s, b):  # type: ignore[no-untyped-def]
    """The table column for ``x[:, s, b]``: ``s + offset`` for an integer offset,
    ``positions[s]`` for one id per sequence position, ``positions[s, b]`` for
    one id per position and batch column.  For views ``exchanged`` gave, the
    column of that sequence index and batch column: for ``(positions, seq,
    heads)`` (``x`` a (head, heads, seq*batch) view) sequence index ``b %
    seq`` and batch column ``s + heads * (b // seq)``; for ``(positions,
    heads)`` (``x`` a (head, heads*seq, batch) view) sequence index ``s //
    heads`` and batch column ``s % heads + heads * b``."""


@overload(_position, jit_options=JIT)
def _ov_position(positions, s, b):  # type: ignore[no-untyped-def]
    if isinstance(positions, types.BaseTuple) and len(positions) == 3:

        def seq_with_batch(positions, s, b):  # type: ignore[no-untyped-def]
            inner, seq, heads = positions
            return _position(inner, b % seq, s + heads * (b // seq))

        return seq_with_batch
    if isinstance(positions, types.BaseTuple):

        def heads_with_seq(positions, s, b):  # type: ignore[no-untyped-def]
            inner, heads = positions
            return _position(inner, s // heads, s % heads + heads * b)

        return heads_with_seq
    if isinstance(positions, types.Integer):
        return lambda positions, s, b: s + positions
    if positions.ndim == 1:
        return lambda positions, s, b: positions[s]
    return lambda positions, s, b: positions[s, b]


def _per_column(positions):  # type: ignore[no-untyped-def]
    """Whether positions differ between batch columns (a compile-time constant)."""


def _varies_by_column(positions: types.Type) -> bool:
    """Whether positions of this Numba type differ between batch columns."""
    return isinstance(positions, types.BaseTuple) or (
        isinstance(positions, types.Array) and positions.ndim == 2
    )


@overload(_per_column, jit_options=JIT)
def _ov_per_column(positions):  # type: ignore[no-untyped-def]
    varies = _varies_by_column(positions)
    return lambda positions: varies


def _sequence_window(row, positions, seq):  # type: ignore[no-untyped-def]
    """The part of a table row (positions innermost) that a sequence reads:
    ``row[offset : offset + seq]`` for an offset, the whole row for ids."""


@overload(_sequence_window, jit_options=JIT, inline="always")
def _ov_sequence_window(row, positions, seq):  # type: ignore[no-untyped-def]
    if isinstance(positions, types.Integer):
        return lambda row, positions, seq: row[positions : positions + seq]
    return lambda row, positions, seq: row


@numba.njit(**JIT_INLINED)
def _pair_windows(cos, sin, shared, h1, h2, positions, seq):  # type: ignore[no-untyped-def]
    """The tables' windows (``_sequence_window``) that the pair of channels
    ``h1, h2`` reads along a sequence of ``seq`` positions, as ``(c1, s1,
    c2, s2)``: the loops along positions read them for each pair."""
    t2 = _table_row(h1, h2, shared)
    return (
        _sequence_window(cos[h1], positions, seq),
        _sequence_window(sin[h1], positions, seq),
        _sequence_window(cos[t2], positions, seq),
        _sequence_window(sin[t2], positions, seq),
    )


def _window_index(positions, s):  # type: ignore[no-untyped-def]
    """Where sequence index ``s`` reads its ``_sequence_window``: ``s`` itself
    after an offset (an index the compiler sees is never negative, so the
    loop vectorises), ``positions[s]`` for ids."""


@overload(_window_index, jit_options=JIT)
def _ov_window_index(positions, s):  # type: ignore[no-untyped-def]
    if isinstance(positions, types.Integer):
        return lambda positions, s: s
    return lambda positions, s: positions[s]


def _written(x, out):  # type: ignore[no-untyped-def]
    """The array a loop writes: ``out``, or ``x`` itself when ``out`` is None
    (float16 ``x``: its bits, ``_in_place``).

    In place, callers pass None rather than ``x`` twice: the compiled loop
    then sees one array, and the compiler can tell that each iteration only
    rewrites what it has just read.  Given two arrays, the compiler checks
    them for overlap before every vectorised loop and, since they are one
    and the same, takes its scalar fallback (in-cache calls in place ran
    2-4x slower than with a separate ``out``)."""


@overload(_written, jit_options=JIT, inline="always")
def _ov_written(x, out):  # type: ignore[no-untyped-def]
    if isinstance(out, types.NoneType):
        return lambda x, out: _in_place(x)
    return lambda x, out: out


def _in_place(x):  # type: ignore[no-untyped-def]
    """``x`` as the array a loop rewrites in place: ``x`` itself, or for
    float16 records, a uint16 view of their bits (the output's storage
    type), which the compiler sees as the same memory as ``x``."""


@overload(_in_place, jit_options=JIT, inline="always")
def _ov_in_place(x):  # type: ignore[no-untyped-def]
    if isinstance(x.dtype, types.Record):
        return lambda x: x.view(np.uint16)
    return lambda x: x


def _written_column(column, out, s, b):  # type: ignore[no-untyped-def]
    """The column a loop writes for ``column`` (``x[:, s, b]``): ``out[:, s,
    b]``, or ``column`` itself in place (``out`` None, as ``_written``)."""


@overload(_written_column, jit_options=JIT, inline="always")
def _ov_written_column(column, out, s, b):  # type: ignore[no-untyped-def]
    if isinstance(out, types.NoneType):
        return lambda column, out, s, b: _in_place(column)
    return lambda column, out, s, b: out[:, s, b]


@intrinsic
def _typed_contiguous(typingctx, run):  # type: ignore[no-untyped-def]
    """The 1-D array ``run`` typed as contiguous: the same array, only its
    type changes, so that the compiler indexes it as adjacent elements.
    Only for a run whose elements are adjacent (``_adjacent``): a run of a
    strided view is typed as strided even then."""
    if not isinstance(run, types.Array) or run.ndim != 1:
        return None
    contiguous = run.copy(layout="C")

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return impl_ret_borrowed(context, builder, contiguous, args[0])

    return contiguous(run), codegen


@intrinsic
def _unrelated(typingctx, run):  # type: ignore[no-untyped-def]
    """The 1-D array ``run`` itself, its data pointer passed through an
    empty piece of assembly, so that the compiler can no longer tell which
    array's memory it lies in.  Costs no instruction.

    A loop that writes two rows of one array (a pair's rows or planes), at a
    distance the compiler cannot know, is not vectorised: the compiler gives
    up on the two writes' dependence.  Of two arrays it knows nothing about,
    it checks at run time that they do not overlap, and vectorises.  In
    place, a row must stay the very array it was read from
    (``_written_at``)."""
    if not isinstance(run, types.Array) or run.ndim != 1:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        array = context.make_array(run)(context, builder, args[0])
        hide = ir.InlineAsm(ir.FunctionType(array.data.type, [array.data.type]), "", "=r,0")
        hidden = context.make_array(run)(context, builder)
        context.populate_array(
            hidden,
            data=builder.call(hide, [array.data]),
            shape=array.shape,
            strides=array.strides,
            itemsize=array.itemsize,
            meminfo=array.meminfo,
            parent=array.parent,
        )
        return impl_ret_borrowed(context, builder, run, hidden._getvalue())

    return run(run), codegen


_BYTE_POINTER = ir.IntType(8).as_pointer()
_PREFETCH_SIGNATURE = ir.FunctionType(ir.VoidType(), [_BYTE_POINTER, *[ir.IntType(32)] * 3])


@intrinsic
def _prefetch_to_write(typingctx, address):  # type: ignore[no-untyped-def]
    """A hint to the CPU that memory at byte ``address`` is about to be
    written: LLVM's ``prefetch`` of its cache line, for writing
    (``prefetchw`` on x86-64 CPUs with PRFCHW, a prefetch for reading on
    others), to be kept in every cache level."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        pointer = builder.inttoptr(args[0], _BYTE_POINTER)
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", [_BYTE_POINTER], _PREFETCH_SIGNATURE
        )
        write, locality, data = (ir.Constant(ir.IntType(32), n) for n in (1, 3, 1))
        builder.call(hint, [pointer, write, locality, data])
        return context.get_dummy_value()

    return types.void(address), codegen


_LINE_BYTES = 64
"""The CPU's cache line, for ``_prefetch_run`` and ``_crossing``."""


@numba.njit(**JIT_INLINED)
def _prefetch_run(run):  # type: ignore[no-untyped-def]
    """``_prefetch_to_write`` for every cache line of the 1-D ``run``, where
    its elements are adjacent (tested here: ``_adjacent``, pasted in at this
    depth, trips an internal check of Numba's)."""
    size = run.shape[0] * run.itemsize
    if size > 0 and run.strides[0] == run.itemsize:
        start = np.intp(run.ctypes.data)
        for address in range(start, start + size, _LINE_BYTES):
            _prefetch_to_write(address)
        _prefetch_to_write(start + size - 1)


@numba.njit(**JIT_INLINED)
def _adjacent(run):  # type: ignore[no-untyped-def]
    """Whether the elements of the 1-D ``run`` are adjacent in memory."""
    return run.shape[0] <= 1 or run.strides[0] == run.itemsize


@numba.njit(**JIT)
def _rotate(x1, x2, c1, s1, c2, s2, dtype):  # type: ignore[no-untyped-def]
    """One RoPE pair, exactly Julia's ``x .* cos + neg_half(x) .* sin``, in
    the storage type of ``dtype`` (the written array's).

    ``x1`` is channel h1 and ``x2`` its partner h2: the rotation gives ``-x2``
    to h1 and ``x1`` to h2.  Two rounded products and a rounded sum, no fused
    multiply-add.  Both inputs are read before either output is written by
    the callers, so the written array may be ``x``.
    """
    y1 = _rnd(_mul(x1, c1, dtype) + _mul(_neg(x2), s1, dtype), dtype)
    y2 = _rnd(_mul(x2, c2, dtype) + _mul(_rotated(x1), s2, dtype), dtype)
    return _store(y1, dtype), _store(y2, dtype)


@numba.njit(**JIT)
def _rotate_pair(x, out, cos, sin, shared, h1, h2, s, b, p):  # type: ignore[no-untyped-def]
    """Rotate channels ``h1, h2`` of column ``x[:, s, b]`` with the tables at position ``p``."""
    c1, s1, c2, s2 = _pair_tables(cos, sin, shared, h1, h2, p)
    out[h1, s, b], out[h2, s, b] = _rotate(
        _load(x[h1, s, b]), _load(x[h2, s, b]), c1, s1, c2, s2, out.dtype
    )


@numba.njit(**JIT)
def _pass_through(value, dtype):  # type: ignore[no-untyped-def]
    """The unpaired last channel of an odd interleaved head, unchanged but
    promoted to ``dtype`` (the written array's)."""
    return _store(_cvt(_load(value), dtype), dtype)


_POSITION_BLOCK = 64
"""Positions per block of AbsolutePE's loop with the channel axis innermost
(batch-first input walks every batch column of a block in turn)."""


@numba.njit(**JIT)
def _rows(start, stop, width):  # type: ignore[no-untyped-def]
    """The rows ``r`` met by the flat range ``start .. stop`` of a (rows, width) grid."""
    return range(start // width, (stop + width - 1) // width)


@numba.njit(**JIT)
def _columns(start, stop, width, row):  # type: ignore[no-untyped-def]
    """The columns of ``row`` inside the flat range ``start .. stop`` of a
    (rows, width) grid, as ``(first, length)``: columns ``first + j`` for
    ``j`` in ``range(length)``.

    Kernels walk a flat range of outer-loop units as nested loops (row, then
    column) rather than by ``divmod`` of a flat index, and count each row's
    columns from 0: the compiler then checks the arrays for overlap once per
    row instead of once per column, which is most of the cost of a short
    innermost loop.  A loop over ``range(first, stop)`` gets the check
    before every column: on the AVX-512 AMD EPYC development machine, RoPE
    in F order on (128, 4096, 32) float32 took 1.4x ``x.copy()``'s time on
    one thread that way, 1.2x counted from 0 (in the benchmark, on two
    threads: 1.28x and 1.08x).
    """
    first = max(start - row * width, 0)
    return first, min(stop - row * width, width) - first


_BLOCK_BYTES = 256 << 10
"""Bytes of output per block of the loops' walk down their outer range."""


@numba.njit(**JIT)
def _blocks_down(start, stop, units, nbytes):  # type: ignore[no-untyped-def]
    """The blocks of the outer range ``start .. stop`` that a loop walks, the
    highest first, as ``(count, size)``: about ``_BLOCK_BYTES`` of the
    ``nbytes`` that the range's ``units`` units write each.  ``_block_down``
    gives each block's bounds; inside a block the loop runs forward.

    Walking down matters for a new output: the kernel zeroes a fresh page
    (2 MB with transparent huge pages) leaving the part below the faulting
    address in the cache, the part above it not; a loop walking up writes
    into evicted lines and pays a read of each, one walking down finds them
    cached (allocating calls 15-35% faster here; no difference with ``out=``
    or in place)."""
    size = max(1, _BLOCK_BYTES * units // max(nbytes, 1))
    return (stop - start + size - 1) // size, size


@numba.njit(**JIT)
def _block_down(start, stop, size, k):  # type: ignore[no-untyped-def]
    """Bounds ``(lo, hi)`` of block ``k`` of ``start .. stop`` counted from the top."""
    hi = stop - k * size
    return max(hi - size, start), hi


def _rotate_column(x, out, cos, sin, pairing, shared, positions, s, b):  # type: ignore[no-untyped-def]
    """RoPE on the pairs of column ``x[:, s, b]`` (the head axis, innermost in F order)."""


@overload(_rotate_column, jit_options=JIT, inline="always")
def _ov_rotate_column(x, out, cos, sin, pairing, shared, positions, s, b):  # type: ignore[no-untyped-def]
    if "A" in (x.layout, getattr(out, "layout", None)):
        return _rotate_column_run
    return _rotate_column_indexed


def _rotate_column_indexed(x, out, cos, sin, pairing, shared, positions, s, b):  # type: ignore[no-untyped-def]
    """``_rotate_column`` element by element, for contiguous arrays and in
    place: the compiler sees the arrays' layout and checks them for overlap
    once for a whole loop over columns."""
    out = _written(x, out)
    half = x.shape[0] // 2
    p = _position(positions, s, b)
    for i in range(half):
        h1, h2 = _pair(i, half, pairing)
        _rotate_pair(x, out, cos, sin, shared, h1, h2, s, b, p)


def _rotate_column_run(x, out, cos, sin, pairing, shared, positions, s, b):  # type: ignore[no-untyped-def]
    """``_rotate_column`` for strided arrays (such as a slice of a larger
    array): through the column's runs in ``x`` and ``out`` (in place, one
    run, read and written), typed as contiguous where their elements are
    adjacent.  Indexed as strided arrays, they could not be checked for
    overlap, and the loop ran element by element: (128, 512, 32) float32 cut
    from a longer F-order array took 1.2-1.5x the time with ``out=`` and
    allocating; Hugging Face's queries cut from a cache, (128, 8, 32, 4)
    float32 in place on (head, heads*seq, batch) views, 1.6x."""
    p = _position(positions, s, b)
    column = x[:, s, b]
    target = _written_column(column, out, s, b)
    if _adjacent(column) and _adjacent(target):
        _rotate_run(
            _typed_contiguous(column), _typed_contiguous(target), cos, sin, p, pairing, shared
        )
    else:
        _rotate_run(column, target, cos, sin, p, pairing, shared)


@numba.njit(**JIT_INLINED)
def _rotate_run(column, target, cos, sin, p, pairing, shared):  # type: ignore[no-untyped-def]
    """RoPE on the pairs of one column's channels (1-D) into ``target``, with
    the tables at its position ``p``."""
    half = column.shape[0] // 2
    for i in range(half):
        h1, h2 = _pair(i, half, pairing)
        c1, s1, c2, s2 = _pair_tables(cos, sin, shared, h1, h2, p)
        target[h1], target[h2] = _rotate(
            _load(column[h1]), _load(column[h2]), c1, s1, c2, s2, target.dtype
        )


def _rotate_rows(x, out, cos, sin, pairing, shared, positions, i, s):  # type: ignore[no-untyped-def]
    """RoPE on pair ``i``'s rows ``x[h1, s, :]`` and ``x[h2, s, :]`` (the batch
    axis, innermost in C order) into ``out`` (``x`` itself in place)."""


@overload(_rotate_rows, jit_options=JIT, inline="always")
def _ov_rotate_rows(x, out, cos, sin, pairing, shared, positions, i, s):  # type: ignore[no-untyped-def]
    if "A" in (x.layout, out.layout) and not _varies_by_column(positions):
        return _rotate_rows_run
    return _rotate_rows_indexed


def _rotate_rows_run(x, out, cos, sin, pairing, shared, positions, i, s):  # type: ignore[no-untyped-def]
    """``_rotate_rows`` for strided arrays (a decoding step's slot in a KV
    cache, a slice of a larger array): through the rows as 1-D runs, typed
    as contiguous where their elements are adjacent.  Indexed as strided
    arrays, the rows ran element by element: a (128, 1, 32) float32 step
    into its slot of a (128, 64, 32) cache took 1.9x the loop's time into a
    new array."""
    half = x.shape[0] // 2
    h1, h2 = _pair(i, half, pairing)
    c1, s1, c2, s2 = _pair_tables(cos, sin, shared, h1, h2, _position(positions, s, 0))
    r1, r2, w1, w2 = x[h1, s], x[h2, s], out[h1, s], out[h2, s]
    if _adjacent(r1) and _adjacent(r2) and _adjacent(w1) and _adjacent(w2):
        _rotate_row_runs(
            _typed_contiguous(r1),
            _typed_contiguous(r2),
            _typed_contiguous(w1),
            _typed_contiguous(w2),
            c1,
            s1,
            c2,
            s2,
        )
    else:
        _rotate_row_runs(r1, r2, w1, w2, c1, s1, c2, s2)


@numba.njit(**JIT_INLINED)
def _rotate_row_runs(r1, r2, w1, w2, c1, s1, c2, s2):  # type: ignore[no-untyped-def]
    """RoPE on one pair's rows (1-D) ``r1`` and ``r2`` into ``w1`` and ``w2``,
    with the tables' values at their position."""
    for b in range(r1.shape[0]):
        w1[b], w2[b] = _rotate(_load(r1[b]), _load(r2[b]), c1, s1, c2, s2, w1.dtype)


def _rotate_rows_indexed(x, out, cos, sin, pairing, shared, positions, i, s):  # type: ignore[no-untyped-def]
    """``_rotate_rows`` element by element, for contiguous arrays and for
    positions per batch column."""
    half = x.shape[0] // 2
    h1, h2 = _pair(i, half, pairing)
    if _per_column(positions):
        for b in range(x.shape[2]):
            p = _position(positions, s, b)
            _rotate_pair(x, out, cos, sin, shared, h1, h2, s, b, p)
    else:
        c1, s1, c2, s2 = _pair_tables(cos, sin, shared, h1, h2, _position(positions, s, 0))
        for b in range(x.shape[2]):
            out[h1, s, b], out[h2, s, b] = _rotate(
                _load(x[h1, s, b]), _load(x[h2, s, b]), c1, s1, c2, s2, out.dtype
            )


@numba.njit(**JIT_INLINED)
def _pass_through_row(x, out, s):  # type: ignore[no-untyped-def]
    """Row ``x[-1, s, :]`` of an odd head (its unpaired last channel), promoted."""
    last = x.shape[0] - 1
    for b in range(x.shape[2]):
        out[last, s, b] = _pass_through(x[last, s, b], out.dtype)


_PREFETCH_AHEAD = 4
"""How many columns ahead of the loop a decoding step in Julia's order asks
for the lines of its output's columns (``_prefetch_column``)."""


def _prefetch_column(written, s, b):  # type: ignore[no-untyped-def]
    """``_prefetch_run`` of column ``written[:, s, b]`` (none beyond the
    batch), where ``written`` is strided (a slot of a KV cache); nothing for
    other arrays.

    A decoding loop writes each token at the next position of its cache,
    whose lines are then seldom in any cache level, and a step's columns lie
    far apart (2 MB in a (128, 4096, 32) float32 cache), where no hardware
    prefetcher follows.  On the AVX-512 AMD EPYC development machine, a
    (128, 1, 32) float32 step into successive slots of such a cache, in a
    tight loop, took 2.4-2.6 us with the columns asked for 4 ahead, against
    3.0-3.3 us without (``np.copyto`` into the same slots: 1.3-1.6 us); in a
    (128, 64, 32) cache, which stays in cache, 0.05 us more.  In C order (a
    slot's rows of 128 bytes) it cost 0.1-0.2 us where the cache fits the
    last-level cache, for 0.25 us less beyond: not used there.
    """


@overload(_prefetch_column, jit_options=JIT, inline="always")
def _ov_prefetch_column(written, s, b):  # type: ignore[no-untyped-def]
    if written.layout != "A":
        return lambda written, s, b: None

    def prefetch(written, s, b):  # type: ignore[no-untyped-def]
        if b < written.shape[2]:
            _prefetch_run(written[:, s, b])

    return prefetch


@numba.njit(**JIT_LOOP)
def _rope_inner_head(x, out, cos, sin, pairing, shared, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """RoPE with the head axis innermost (F order); outer range over (batch, seq)."""
    posted(post)
    written = _written(x, out)
    head, seq, batch = x.shape
    count, size = _blocks_down(start, stop, seq * batch, written.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for b in _rows(lo, hi, seq):
            first, length = _columns(lo, hi, seq, b)
            for j in range(length):
                s = first + j
                _rotate_column(x, out, cos, sin, pairing, shared, positions, s, b)
                if head % 2:
                    written[head - 1, s, b] = _pass_through(x[head - 1, s, b], written.dtype)


@numba.njit(**JIT_LOOP)
def _rope_inner_batch(x, out, cos, sin, pairing, shared, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """RoPE with the batch axis innermost (C order); outer range over pairs
    (and, for an odd head, the unpaired last channel as one more unit)."""
    posted(post)
    out = _written(x, out)
    half = x.shape[0] // 2
    count, size = _blocks_down(start, stop, (x.shape[0] + 1) // 2, out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for i in range(lo, hi):
            if i == half:
                for s in range(x.shape[1]):
                    _pass_through_row(x, out, s)
            else:
                for s in range(x.shape[1]):
                    _rotate_rows(x, out, cos, sin, pairing, shared, positions, i, s)


@numba.njit(**JIT_LOOP)
def _rope_short_batch(x, out, cos, sin, pairing, shared, batch, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """``_rope_inner_batch`` for C-contiguous arrays of a few batch columns
    (``_UNROLLED_BATCH``), whose batch rows are too short to vectorise:
    ``batch`` is a tuple of as many Nones, a length the compiler sees as a
    constant.  Each channel's (seq, batch) plane is one run of memory; the
    loop along it unrolls the batch and vectorises along positions, reading
    the tables along positions (``_ALONG_POSITIONS``).  The planes are rows
    of (head, seq * batch) views, each made ``_unrelated`` to the others:
    as ``ravel`` views of ``x[h]`` (0.05 us each, a call of Numba's reshape
    routine), a (128, 8, 2) call took 13 us against 2.6 us."""
    posted(post)
    written = _written(x, out)
    head, seq = x.shape[0], x.shape[1]
    columns = len(batch)
    planes = x.reshape(head, seq * columns)
    targets = None if out is None else out.reshape(head, seq * columns)
    half = head // 2
    count, size = _blocks_down(start, stop, (head + 1) // 2, written.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for i in range(lo, hi):
            if i == half:
                for s in range(seq):
                    _pass_through_row(x, written, s)
                continue
            h1, h2 = _pair(i, half, pairing)
            c1, s1, c2, s2 = _pair_windows(cos, sin, shared, h1, h2, positions, seq)
            r1, r2 = _unrelated(planes[h1]), _unrelated(planes[h2])
            w1, w2 = _written_at(r1, targets, h1), _written_at(r2, targets, h2)
            for s in range(seq):
                p = _window_index(positions, s)
                for b in range(columns):
                    j = s * columns + b
                    w1[j], w2[j] = _rotate(
                        _load(r1[j]), _load(r2[j]), c1[p], s1[p], c2[p], s2[p], written.dtype
                    )


def _written_at(row, out, index):  # type: ignore[no-untyped-def]
    """The row a loop writes for ``row`` (the 1-D view of ``x`` at ``index``,
    an integer or a tuple): ``out[index]``, ``_unrelated`` to the other
    rows, or in place (``out`` None) ``row`` itself, so that the compiler
    sees each element written where it was read (as another view of the
    same row, the loop took its scalar fallback: 2.5x as long in place)."""


@overload(_written_at, jit_options=JIT, inline="always")
def _ov_written_at(row, out, index):  # type: ignore[no-untyped-def]
    if isinstance(out, types.NoneType):
        return lambda row, out, index: _in_place(row)
    return lambda row, out, index: _unrelated(out[index])


@numba.njit(**JIT_LOOP)
def _rope_positions_outer_head(x, out, cos, sin, pairing, shared, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """``_rope_inner_head`` with positions outermost: range over positions,
    every batch column of one position in a loop over the whole batch axis.
    For arrays whose seq axis has the largest stride, and for a few
    positions (decoding, see ``_FEW_POSITIONS``), whose columns of a slot of
    a KV cache are asked for ahead (``_prefetch_column``)."""
    posted(post)
    written = _written(x, out)
    head, seq, batch = x.shape
    decoding = seq <= _FEW_POSITIONS
    count, size = _blocks_down(start, stop, seq, written.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for s in range(lo, hi):
            if decoding:
                for b in range(_PREFETCH_AHEAD):
                    _prefetch_column(written, s, b)
            for b in range(batch):
                if decoding:
                    _prefetch_column(written, s, b + _PREFETCH_AHEAD)
                _rotate_column(x, out, cos, sin, pairing, shared, positions, s, b)
            if head % 2:
                for b in range(batch):
                    written[head - 1, s, b] = _pass_through(x[head - 1, s, b], written.dtype)


@numba.njit(**JIT_LOOP)
def _rope_positions_outer_batch(x, out, cos, sin, pairing, shared, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """``_rope_inner_batch`` with positions outermost: range over positions,
    every pair of one position in a loop over the whole head.  For arrays
    whose seq axis has the largest stride, and for a few positions."""
    posted(post)
    out = _written(x, out)
    count, size = _blocks_down(start, stop, x.shape[1], out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for s in range(lo, hi):
            for i in range(x.shape[0] // 2):
                _rotate_rows(x, out, cos, sin, pairing, shared, positions, i, s)
            if x.shape[0] % 2:
                _pass_through_row(x, out, s)


@numba.njit(**JIT_LOOP)
def _rope_inner_seq(x, out, cos, sin, pairing, shared, positions, start, stop, post):  # type: ignore[no-untyped-def]
    """RoPE with the seq axis innermost (C order with a single batch column)
    on (head, batch, seq) views; outer range over pairs (and, for an odd
    head, the unpaired last channel as one more unit), as
    ``_rope_inner_batch``.  One position per sequence index (not per column).

    ``cos`` and ``sin`` are the tables with positions innermost (C order),
    so each pair reads its table rows along the sequence, as it reads ``x``.
    With the seq axis last, a C-contiguous view tells the compiler that its
    elements are adjacent, and the loop vectorises; each pair's rows are
    ``_unrelated`` (indexed as one array, (128, 8-512, 1) float32 calls took
    1.03-1.2x as long).
    """
    posted(post)
    written = _written(x, out)
    head, batch, seq = x.shape
    half = head // 2
    count, size = _blocks_down(start, stop, (head + 1) // 2, written.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for i in range(lo, hi):
            if i == half:
                for b in range(batch):
                    for s in range(seq):
                        written[head - 1, b, s] = _pass_through(x[head - 1, b, s], written.dtype)
                continue
            h1, h2 = _pair(i, half, pairing)
            c1, s1, c2, s2 = _pair_windows(cos, sin, shared, h1, h2, positions, seq)
            for b in range(batch):
                r1, r2 = _unrelated(x[h1, b]), _unrelated(x[h2, b])
                w1, w2 = _written_at(r1, out, (h1, b)), _written_at(r2, out, (h2, b))
                for s in range(seq):
                    p = _window_index(positions, s)
                    w1[s], w2[s] = _rotate(
                        _load(r1[s]), _load(r2[s]), c1[p], s1[p], c2[p], s2[p], written.dtype
                    )


_ALONG_POSITIONS = (_rope_inner_batch, _rope_inner_seq, _rope_short_batch)
"""The loops that read the tables along positions inside each pair: they
take copies of the tables with positions innermost (C order), so that
consecutive positions' values lie side by side.  Laid out as ``RoPE`` keeps
them (the head innermost), each position's values lie a row of the head
apart: on the AMD EPYC (AVX-512) development machine, ``rope(x, out=out)``
on a C-order (128, 512, 32) float32 array in cache took 1.2x as long."""


_SHORT_ROW_BYTES = 32
"""One AVX2 vector.  Innermost rows shorter than this do not vectorise.

AbsolutePE in C order with batch rows of at most this many bytes, in
``x`` and in ``out`` (float32 up to 8 columns, float64 up to 4), runs the
loop unrolled along the batch, ``_absolute_short_batch``, where both are
C-contiguous; elsewhere, with rows shorter than this, it puts the channel
axis innermost, one position at a time (``_channels_inner``), as do the
loops with position ids.  On the AVX-512 AMD EPYC
development machine, ``pe(x, out=out)`` float32 unrolled on (512, 512,
2/3/4) took 46-62 against 139-206 us; (33, 512, 5/7/8) 7.4/14/10.5
against 24/35/18 us and (512, 512, 5/7/8) 74/133/105 against 195/280/162
us (``np.copyto``: 84/117/139 us), in place alike; float16 into float32
with 5-8 columns 3.5x as fast.  Float64 with 5-7 columns gained
1.1-1.35x, with 8 (64-byte rows, which the batch loop vectorises) took 3x
as long; float32 with 9-16 columns gained nothing and took 3-8x as long
in place.  The channel loop against the batch loop, float32 batches of
2, 4 and 8: 3x and 1.7x faster, and 2x slower (with the batch loop
ranging over positions, batches of 4 and 6 measured 0.9-1.2x either
way).  RoPE keeps the batch axis innermost: its alternatives read x and
both tables with strides and measured 1-4x slower.

A row's bytes are counted in the wider of ``x``'s and ``out``'s types.
Counted in ``x``'s, float16 into float32 with 9-15 columns took the
channel loop, 2.4-9.9x the batch loop's time on the AVX2 AMD EPYC
machine ((1..512, 512..2048, 9..15) with an offset); float32 into float64
(LearnedPE's float64 table) with 5-7 columns 1.1-2.5x.  With position
ids per column, float32 C order, the channel loop against the loop along
the batch (``_absolute_ids``): 0.24-0.5x its time with 2-4 columns, 0.4-0.95x
with 5-6, 0.6-1.5x with 8 (slower beyond the caches); float64 0.35-0.7x
with 2 columns, 0.5-1.2x with 4; (seq 1-2048, 64-4096 channels)."""


_UNROLLED_BATCH = 4
"""C-order arrays with a batch of 2 up to this many columns run RoPE's loop
the compiler unrolls along the batch, ``_rope_short_batch``: rows of so
few elements do not vectorise in the batch loop.  On the AVX-512 AMD EPYC
development machine, ``rope(x, out=out)`` on float32 (128, 512, b) in
cache, one thread, took 20, 26 and 31 us for batches of 2, 3 and 4
against 78, 90 and 64 us, and 112 against 311 us on (128, 4096, 2)
(``np.copyto``: 6, 11, 18 and 64 us); float64 alike.  With 5-7 columns
the unrolled RoPE loop does not vectorise and took 1.5-3x as long."""


_FEW_POSITIONS = 2
"""Up to this many positions (decoding), a call that runs on one thread
loops over positions outermost (as arrays whose seq axis has the largest
stride always do) and over whole axes inside (RoPE: the head
or the batch; AbsolutePE: channels and batch), so the compiler checks the
arrays for overlap once per position rather than once per column or row.
Measured in one process on RoPE float32 (128, 1, 32), compiled call alone:
C order 0.52-0.58x the time of the usual loop, F order 0.8-0.9x; two
positions 0.7x and 0.9x; three or four no faster."""


Positions = int | np.ndarray | tuple[Any, int, int] | tuple[Any, int]
"""Where a RoPE loop reads the tables (``_position``): an offset, ids, or
``(offset or ids, seq, heads)`` and ``(offset or ids, heads)`` for views
``exchanged`` gave."""


def _traffic(x: np.ndarray, out: np.ndarray | None) -> int:
    """Bytes a forward pass reads and writes (``out`` None: in place)."""
    return x.nbytes + (x if out is None else out).nbytes


def _short_batch(x: np.ndarray, out: np.ndarray | None) -> bool:
    """Whether the batch rows of a C-order (a, b, batch) view, read from
    ``x`` and written to ``out`` (None in place), are too short to vectorise."""
    return x.shape[2] * _widest(x, out) < _SHORT_ROW_BYTES


def _widest(x: np.ndarray, out: np.ndarray | None) -> int:
    """The larger itemsize of ``x`` and ``out`` (None: in place)."""
    return x.itemsize if out is None else max(x.itemsize, out.itemsize)


def _channels_inner(x: np.ndarray, out: np.ndarray | None, inner: int) -> bool:
    """Whether AbsolutePE's loops over a (seq, channel, batch) ``x`` whose
    axis ``inner`` is innermost in memory put the channels innermost: where
    they are, or where the batch is and its rows are too short to vectorise
    (``_short_batch``)."""
    return inner == 1 or (inner == 2 and _short_batch(x, out))


def _smallest_stride(x: np.ndarray) -> int:
    """The axis of a 3-D array to loop over innermost: the smallest stride among
    axes longer than 1 (ties go to the first axis; 0 when none is longer)."""
    (n0, n1, n2), (a, b, c) = x.shape, x.strides
    a = abs(a) if n0 > 1 else math.inf
    b = abs(b) if n1 > 1 else math.inf
    c = abs(c) if n2 > 1 else math.inf
    return 0 if a <= b and a <= c else 1 if b <= c else 2


def _few_positions(x: np.ndarray, seq_axis: int, traffic: int) -> bool:
    """Whether a call on ``x`` has at most ``_FEW_POSITIONS`` positions (along
    ``seq_axis``) and runs on one thread."""
    return x.shape[seq_axis] <= _FEW_POSITIONS and _parallel.serial(traffic)


def _seq_outermost(x: np.ndarray, seq_axis: int) -> bool:
    """Whether the seq axis (``seq_axis``) of ``x`` is longer than 1 and has
    the largest stride of its axes longer than 1: an array stored position
    by position, such as PyTorch's (seq, batch, features) seen as
    (seq, features, batch), or (seq, heads, head) as (head, seq, heads)."""
    stride = abs(x.strides[seq_axis])
    return x.shape[seq_axis] > 1 and all(
        abs(step) <= stride for n, step in zip(x.shape, x.strides, strict=True) if n > 1
    )


def rope_forward(
    x: np.ndarray,
    out: np.ndarray | None,
    cos: np.ndarray,
    sin: np.ndarray,
    pairing: int | None,
    shared: bool | None,
    along_positions: Callable[[np.ndarray, int], np.ndarray],
    packed: Callable[[np.ndarray, np.ndarray], np.ndarray],
    positions: Positions,
) -> None:
    """Rotate ``x`` (head, seq, batch) into ``out`` with tables (head, positions).

    ``x`` is float16 as ``F16_RECORD``, or bool/integer/float32/float64;
    ``out`` is float32/float64, or uint16 holding float16 bits, or None to
    rotate ``x`` in place.  ``pairing`` is an int (any) for the half split
    or None for interleaved pairs; ``shared`` True when the two rows of
    every pair are equal in both tables, else None; ``positions`` an offset,
    one id per position (seq,) or per position and column (seq, batch), or
    such positions for views ``exchanged`` gave.  Arrays stored with their
    heads inside each position run on such views (``exchanged``).  The
    loop order follows the strides of ``x`` (innermost the smallest, and
    positions outermost where the seq axis has the largest), or those of an
    ``out`` laid out across ``x`` (``_crossing``); large calls are split
    over threads.  The loop along the sequence reads the tables as
    ``along_positions(table, stop)`` returns them: C order (positions
    innermost), covering at least positions ``0 .. stop-1``; the loops along
    the head read ``packed(cos, sin)`` where partner rows are equal
    (``packed_tables``).
    """
    traffic = _traffic(x, out)
    views = exchanged(x, out, positions)
    if views is not None:
        x, out, positions = views
    kernel, length = _rope_loop(x, out, positions, traffic)
    tables = _read_tables(kernel, x, cos, sin, shared, along_positions, packed, positions)
    arguments = _loop_arguments(kernel, x, tables, pairing, shared)
    run_ranges(kernel, length, traffic, *_kernel_views(kernel, x, out), *arguments, positions)


def packed_tables(cos: np.ndarray, sin: np.ndarray, second: slice) -> np.ndarray:
    """RoPE's two tables (head, positions) in one, for tables whose partner
    rows are equal: ``cos`` with the rows ``second`` (every pair's second
    channel) taken from ``sin``, in F order (read-only), the same bits.
    The loops along the head then read one column per position for both
    tables instead of one half column of each: in cache, on two threads,
    such a loop on (128, 512, 32) float32 in F order took 0.67x
    ``np.copyto``'s time instead of 0.94-0.98x (AMD machine)."""
    table = np.array(cos, order="F")
    table[second] = sin[second]
    table.flags.writeable = False
    return table


def _read_tables(
    kernel: Any,
    x: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    shared: bool | None,
    along_positions: Callable[[np.ndarray, int], np.ndarray],
    packed: Callable[[np.ndarray, np.ndarray], np.ndarray],
    positions: Positions,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The tables ``kernel`` reads for ``x`` at ``positions``: for the loops
    along the sequence inside each pair, ``along_positions`` of each,
    covering the positions read; for the loops along the head with equal
    partner rows, ``packed(cos, sin)`` and None (``_pair_tables``)."""
    if kernel in _ALONG_POSITIONS:
        stop = _stop(positions) if isinstance(positions, np.ndarray) else positions + x.shape[1]
        return along_positions(cos, stop), along_positions(sin, stop)
    if shared and kernel in (_rope_inner_head, _rope_positions_outer_head):
        return packed(cos, sin), None
    return cos, sin


def _seq_last(a: np.ndarray) -> np.ndarray:
    """A (head, seq, batch) array as the (head, batch, seq) view ``_rope_inner_seq`` takes."""
    return a.transpose(0, 2, 1)


def _kernel_views(
    kernel: Any, x: np.ndarray, out: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """``x`` and ``out`` as ``kernel`` takes them: ``_seq_last`` views for
    ``_rope_inner_seq``, the arrays themselves for the other loops."""
    if kernel is not _rope_inner_seq:
        return x, out
    return _seq_last(x), None if out is None else _seq_last(out)


@typing.overload
def exchanged(
    x: np.ndarray, out: np.ndarray, positions: int | np.ndarray
) -> tuple[np.ndarray, np.ndarray, Positions] | None: ...
@typing.overload
def exchanged(
    x: np.ndarray, out: None, positions: int | np.ndarray
) -> tuple[np.ndarray, None, Positions] | None: ...
def exchanged(
    x: np.ndarray, out: np.ndarray | None, positions: int | np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, Positions] | None:
    """The call of ``x`` (head, seq, heads, batch...) into ``out`` on (head,
    heads, seq*batch) or (head, heads*seq, batch) views, for arrays stored
    with their heads inside each position; None for other layouts, or where
    both views would copy.

    Such arrays are views of (batch..., seq, heads, head) arrays: Hugging
    Face's (batch, seq, heads, head_dim) queries with their axes reversed,
    the head axis innermost and the heads axis stepping less than the
    sequence.  With their axes 1 and 2 exchanged and (seq, batch...) merged
    in F order they are F-contiguous, which the compiler vectorises (its
    loop along the head ran 2-2.5x faster than on the same elements seen as
    strided), and one loop runs them whatever their batch axes.  Where the
    seq axis does not merge with the batch (queries cut from a longer
    cache), it merges with the heads instead (all but a cut of the heads,
    such as a fused projection's part, which the first merge takes).  A
    decoding step (seq 1) is taken only where its heads and batch axes do
    not merge (cut from a cache, a fused projection's part): merged, they
    run as (head, 1, heads*batch) views with no exchange.

    Returns the views of ``x`` and ``out`` (None stays None, ``x`` itself
    stays the view of ``x``) and the positions the loops read for them
    (``_exchanged_positions``).
    """
    shape, strides = x.shape, x.strides
    if shape[0] <= 1 or shape[1] == 0 or shape[2] <= 1:
        return None
    if shape[1] == 1:  # a decoding step: only where its other axes do not merge
        flags = x.flags  # contiguous arrays merge: asked first, ``merged`` costs microseconds
        if x.ndim == 3 or flags.c_contiguous or flags.f_contiguous or merged(x) is not None:
            return None
    elif abs(strides[2]) >= abs(strides[1]):
        return None
    if any(n > 1 and abs(step) < abs(strides[0]) for n, step in zip(shape, strides, strict=True)):
        return None
    seq, heads = shape[1], shape[2]
    for columns in (heads, heads * seq):
        x_view = _exchanged_view(x, columns)
        if x_view is None:
            continue
        out_view = None if out is None else x_view if out is x else _exchanged_view(out, columns)
        if out is None or out_view is not None:
            return x_view, out_view, _exchanged_positions(positions, seq, heads, columns)
    return None


def _exchanged_view(a: np.ndarray, columns: int) -> np.ndarray | None:
    """``a`` (head, seq, heads, batch...) as a (head, columns, rest) view
    of its axes (head, heads, seq, batch...) merged in F order, or None
    where that would copy."""
    return viewed(a.swapaxes(1, 2), (a.shape[0], columns, -1), "F")


def _exchanged_positions(
    positions: int | np.ndarray, seq: int, heads: int, columns: int
) -> Positions:
    """What the loops read (``_position``) for positions of an array (head,
    seq, heads, batch...) on ``exchanged`` views of ``columns`` columns:
    ``(positions, seq, heads)`` on (head, heads, seq*batch) views,
    ``(positions, heads)`` on (head, heads*seq, batch) views; ids per
    column of several batch axes as (seq, heads*batch)."""
    if isinstance(positions, np.ndarray) and positions.ndim > 2:
        positions = positions.reshape(seq, -1, order="F")
    return (positions, seq, heads) if columns == heads else (positions, heads)


def _stop(positions: np.ndarray) -> int:
    """One past the largest position id (0 for none)."""
    return int(positions.max()) + 1 if positions.size else 0


def _crossing(x: np.ndarray, out: np.ndarray | None, inner: int) -> int | None:
    """The axis of ``out``'s smallest stride where a loop follows ``out``'s
    layout rather than that of ``x`` (whose smallest stride is along
    ``inner``), else None.  It does where ``out`` is laid out otherwise (a
    C-order step into a slot of an F-order cache, an F-order array into a
    C-order one) and ``x``'s runs along ``inner`` span a cache line at least
    in ``x``'s own type (16 float32 or 32 float16 elements and more): the
    loop then writes ``out`` in order, and the loops that take it
    (``_rope_loop``, ``_absolute_inner``) read whole lines of ``x``, each
    within a short stretch of the loop.

    Following ``x`` wrote each of ``out``'s lines an element or a run at a
    time, long before its next.  On the AVX-512 AMD EPYC development
    machine, RoPE (positions outermost, ``_rope_loop``) on (128, 1, 32)
    float32 into a slot of a (128, 64, 32) cache took 15-18 us from C order
    into F order and 27-28 us from F into C, 2.3-2.7 us following ``out``;
    (128, 4096, 32) 55 and 105 ms, 23 and 9.6 ms; (128, 2048, 128) 112-144
    and 204-212 ms, 46-47 and 31-34 ms.  AbsolutePE from F order into C order:
    (4096, 512, 16) 500 ms, 98 ms following ``out``; (100, 512, 32) 6.4 and
    1.05 ms; (100, 512, 4) 1.1 and 0.11 ms; a (1, 512, 32) step from C
    order into F, 32 and 9 us.
    """
    if out is None or x.shape[inner] * x.itemsize < _LINE_BYTES:
        return None
    along = _smallest_stride(out)
    return None if along == inner else along


def _rope_loop(
    x: np.ndarray, out: np.ndarray | None, positions: Positions, traffic: int
) -> tuple[Any, int]:
    """The RoPE loop for ``x``'s layout (or ``out``'s, ``_crossing``) and
    the length of its outer range: innermost along the smallest stride (seq
    only with one position per sequence index, never for exchanged views,
    whose positions are tuples); positions outermost where the loop follows
    ``out``'s layout, where the seq axis has the largest stride, or for a
    call of at most ``_FEW_POSITIONS`` positions that runs on one thread."""
    head, seq, batch = x.shape
    inner = _smallest_stride(x)
    # Not from the seq axis: lines of x would then hold a few positions each,
    # read once per position ((128, 4096, 1) C into F took 0.9 ms following
    # out, 0.36 ms following x).
    along = None if inner == 1 else _crossing(x, out, inner)
    if along is not None:
        inner = along
    if inner == 1 and _one_per_index(positions):
        return _rope_inner_seq, (head + 1) // 2
    if along is not None or _few_positions(x, 1, traffic) or _seq_outermost(x, 1):
        return _rope_positions_outer_batch if inner == 2 else _rope_positions_outer_head, seq
    if inner == 2 and _one_per_index(positions) and _unrolled_batch(x, out, _UNROLLED_BATCH):
        return _rope_short_batch, (head + 1) // 2
    return (_rope_inner_batch, (head + 1) // 2) if inner == 2 else (_rope_inner_head, seq * batch)


def _unrolled_batch(x: np.ndarray, out: np.ndarray | None, most: int) -> bool:
    """Whether ``x`` and ``out`` (None in place) are C-contiguous arrays of 2
    to ``most`` batch columns (the last axis), which ``_rope_short_batch``
    and ``_absolute_short_batch`` run (``_UNROLLED_BATCH``,
    ``_SHORT_ROW_BYTES``)."""
    return (
        2 <= x.shape[2] <= most and x.flags.c_contiguous and (out is None or out.flags.c_contiguous)
    )


def _one_per_index(positions: Positions) -> bool:
    """Whether RoPE's ``positions`` give one position per sequence index (an
    offset, or ids of shape (seq,)), as its loops along positions need."""
    return isinstance(positions, int) or (isinstance(positions, np.ndarray) and positions.ndim == 1)


def _loop_arguments(
    kernel: Any,
    x: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray | None],
    pairing: int | None,
    shared: bool | None,
) -> tuple[Any, ...]:
    """What ``kernel`` takes between ``x``, ``out`` and the positions: the
    ``tables`` it reads, ``pairing`` and ``shared``, and for
    ``_rope_short_batch`` the batch as a tuple of as many Nones."""
    arguments = (*tables, pairing, shared)
    return (*arguments, (None,) * x.shape[2]) if kernel is _rope_short_batch else arguments


Direct = tuple[Callable[..., None], tuple[Any, ...], int, int | None]
"""A remembered compiled call: ``(entry, args, length, last)``, see
``rope_direct``; ``last`` is the largest offset its tables cover for its
sequence length where they are a copy of the layer's first positions, None
where they are the layer's own."""


def rope_direct(
    x: np.ndarray,
    out: np.ndarray | None,
    cos: np.ndarray,
    sin: np.ndarray,
    pairing: int | None,
    shared: bool | None,
    along_positions: Callable[[np.ndarray, int], np.ndarray],
    packed: Callable[[np.ndarray, np.ndarray], np.ndarray],
    positions: int | np.ndarray,
) -> Direct | None:
    """The compiled loop ``rope_forward`` ran for arrays like ``x`` and
    ``out`` with ``positions`` (an offset, or ids of that type and layout),
    as ``(entry, args, length, last)``: ``entry(x, out, *args, positions,
    0, length, NO_POST)`` is that call for any arrays of the same types
    (``args``: the tables it reads, ``pairing`` and ``shared``, and what
    else the loop takes, ``_loop_arguments``), split
    over threads as ``rope_forward`` splits it.  ``x`` has 3 dims, or more
    where it is stored with its heads inside each position (``exchanged``:
    the entry then takes such arrays and their positions, and runs on their
    views).  ``last``: the largest offset the entry's tables cover, where
    the loop reads them along positions (copies of their first positions,
    ``rope_forward``), else None.  None where the loop has not been
    compiled yet.

    Repeated calls of one layout (decoding one token at a time, a model's
    forward pass on same-shaped batches) then skip the loop choice and
    Numba's type dispatch.
    """
    views = exchanged(x, out, positions)
    if views is None and x.ndim > 3:
        return None
    traffic = _traffic(x, out)
    x3, out3, kernel_positions = (x, out, positions) if views is None else views
    kernel, length = _rope_loop(x3, out3, kernel_positions, traffic)
    tables = _read_tables(kernel, x3, cos, sin, shared, along_positions, packed, kernel_positions)
    args = _loop_arguments(kernel, x3, tables, pairing, shared)
    last = None
    if kernel in _ALONG_POSITIONS:  # copies each kept and grown on its own (backward shares cos)
        last = min(table.shape[1] for table in tables if table is not None) - x3.shape[1]
    kernel_x, kernel_out = _kernel_views(kernel, x3, out3)
    found = _compiled(kernel, kernel_x, kernel_out, args, kernel_positions, length, traffic)
    if found is None:
        return None
    entry = found[0]
    if kernel is _rope_inner_seq:  # never for exchanged views, whose positions are tuples
        entry = on_views(entry, _seq_last)
    elif views is not None:
        entry = _on_exchanged(entry, x.shape, x3.shape[1])
    return entry, args, length, last


def _on_exchanged(
    entry: Callable[..., None], shape: tuple[int, ...], columns: int
) -> Callable[..., None]:
    """``entry``, found for the views of ``columns`` columns ``exchanged``
    gives of arrays of ``shape``, as an entry of such arrays and their
    positions (an offset, or ids of one batch axis: those of more are never
    remembered).  Views, never copies: the record is only for arrays laid
    out as those ``exchanged`` viewed, up to the strides of axes of length
    1, which numpy's reshape ignores."""
    head, seq, heads = shape[:3]

    def exchanged_and_merged(a: np.ndarray) -> np.ndarray:
        return a.swapaxes(1, 2).reshape((head, columns, -1), order="F")

    view: Callable[[np.ndarray], np.ndarray] = exchanged_and_merged
    if len(shape) == 3:
        view = methodcaller("swapaxes", 1, 2)
    elif seq == 1 and len(shape) == 4:
        # (head, heads, batch), the step's one position dropped: the view
        # ``exchanged_and_merged`` gives, at a quarter of its cost (0.3
        # against 1.3 us).
        view = itemgetter((slice(None), 0))

    def call(
        x: np.ndarray,
        out: np.ndarray | None,
        cos: np.ndarray,
        sin: np.ndarray | None,
        pairing: int | None,
        shared: bool | None,
        positions: int | np.ndarray,
        start: int,
        stop: int,
        post: np.ndarray,
    ) -> None:
        entry(
            view(x),
            None if out is None else view(out),
            cos,
            sin,
            pairing,
            shared,
            _exchanged_positions(positions, seq, heads, columns),
            start,
            stop,
            post,
        )

    return call


def absolute_direct(
    x: np.ndarray, out: np.ndarray | None, table: np.ndarray, by_position: np.ndarray | None
) -> Direct | None:
    """As ``rope_direct``, for ``absolute_forward`` on (seq, channel, batch)
    arrays: the loop it runs for arrays like ``x`` and ``out``, reading
    ``table`` (channel, position), or ``by_position`` where given and the
    loop reads a position at a time (the same table in F order, which may
    cover fewer positions: the record's ``last`` then says how many).  None
    where ``x`` has more than 3 dims or the loop has not been compiled yet.
    """
    if x.ndim != 3:
        return None
    inner = _absolute_inner(x, out)
    embeddings = table if inner == 0 or by_position is None else by_position
    traffic = _traffic(x, out)
    kernel, length, view, args = _absolute_loop(x, out, inner, embeddings, traffic)
    views = (x, out) if view is None else (view(x), None if out is None else view(out))
    found = _compiled(kernel, *views, args, 0, length, traffic)
    if found is None:
        return None
    entry = found[0] if view is None else on_views(found[0], view)
    return entry, args, length, None if embeddings is table else embeddings.shape[1] - x.shape[0]


@numba.njit(**JIT_LOOP)
def ids_within(ids, length):  # type: ignore[no-untyped-def]
    """Whether every position id lies in ``0 .. length - 1``, as the checks
    require: the range check of a remembered call with ids (``DirectCalls``).
    A compiled loop, because numpy's ``max`` of a decoding step's few ids
    costs more (1.4 us) than the step's own loop."""
    for i in ids.flat:
        if i < 0 or i >= length:
            return False
    return True


@numba.njit(**JIT_LOOP)
def ids_run(ids):  # type: ignore[no-untyped-def]
    """The offset ``k`` that position ids (seq,) or (seq, batch...) stand
    for, where each batch column holds ``k, k + 1, .., k + seq - 1``; -1
    where they do not, or are empty, or the run starts below 0.  What the
    additive encodings' checked call reads as an offset, found without
    numpy's temporaries for a remembered call (``remembered_sum``)."""
    columns = ids.size // max(ids.shape[0], 1)
    start = -1
    position = column = 0
    for i in ids.flat:
        if position == 0 and column == 0:
            start = i
        if start < 0 or i != start + position:
            return -1
        column += 1
        if column == columns:
            position += 1
            column = 0
    return start


def _compiled(
    kernel: Any,
    x: np.ndarray,
    out: np.ndarray | None,
    args: tuple[Any, ...],
    positions: Positions,
    length: int,
    traffic: int,
) -> Direct | None:
    """``kernel``'s compiled entry for these arguments (``positions`` and a
    range stand for any of their types), without Numba's type dispatch; for
    a call of ``traffic`` bytes that ``run_ranges`` splits over threads, an
    entry that splits its range the same way.  None if not compiled."""
    arguments = (x, out, *args, positions, 0, length, NO_POST)
    compiled = kernel.overloads.get(tuple(kernel.typeof_pyval(a) for a in arguments))
    if compiled is None:
        return None
    if _parallel.serial(traffic):
        return compiled.entry_point, args, length, None
    return _split(compiled.entry_point, traffic), args, length, None


def _split(entry: Callable[..., None], traffic: int) -> Callable[..., None]:
    """``entry(*arguments, 0, length, NO_POST)`` with its range split by ``run_ranges``."""

    def split(*arguments: Any) -> None:
        run_ranges(entry, arguments[-2], traffic, *arguments[:-3])

    return split


@numba.njit(**JIT_LOOP)
def _absolute_inner_seq(x, out, embeddings, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE with the seq axis innermost (Julia's order); outer range over (batch, channel)."""
    posted(post)
    out = _written(x, out)
    seq, channels, batch = x.shape
    count, size = _blocks_down(start, stop, batch * channels, out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for b in _rows(lo, hi, channels):
            first, length = _columns(lo, hi, channels, b)
            for j in range(length):
                c = first + j
                row = embeddings[c, offset : offset + seq]  # indexed from 0: vectorises
                for s in range(seq):
                    out[s, c, b] = _add(_load(x[s, c, b]), row[s], out.dtype)


_SHORT_SEQUENCE = 256
"""Sequences up to this length take ``_absolute_planes`` in Julia's order
(with ``_PLANE_BATCH`` batch columns or more): rows that short spend much
of their time setting up each row's loop (measured on (seq, 512, batch)
float32: seq 10-256 1.2-1.9x faster than row by row, 512 and longer no
faster)."""

_PLANE_BATCH = 3
"""Batch columns from which ``_absolute_planes`` pays for laying out its
plane, a pass over the table's part that each batch column then reads.
On the AVX-512 AMD EPYC development machine, (2-256, 512, 1-2) float32 in
Julia's order took 0.60-0.92x as long row by row as in planes (float64
alike); with 3-4 batch columns, rows took 1.1-1.4x as long up to 8
positions and 0.8-1.0x beyond; with 8-32, 2-6x at a few positions, about
the same from 64."""

_PLANE_ELEMENTS = 1 << 18
"""Table elements laid out at a time for ``_absolute_planes`` (1 MiB of
float32, about the second-level cache): planes larger than that (many
channels) are added a group of channels at a time."""


_TILE = 16
"""Positions of a tile: of the square tiles in which ``_table_plane`` lays
out a position-major table (a tile's positions of 16 channels share their
lines, 64 bytes of float32), and of ``_absolute_tiles``'s (16 positions of
float32, a line of an array with the sequence innermost)."""


@numba.njit(**JIT)
def _table_plane(embeddings, offset, plane):  # type: ignore[no-untyped-def]
    """``plane[s + seq*c] = embeddings[c, offset + s]``: the table laid out as
    one batch column of ``x`` in Julia's order, (seq, channel) column-major.

    A position-major table (each position's channels adjacent: LearnedPE's
    ``(max_len, d)`` seen as ``(d, max_len)``) is read tile by tile
    (``_TILE``), each line read once; read along its rows, every element
    read was a line of its own."""
    channels = embeddings.shape[0]
    seq = plane.size // max(channels, 1)
    position_major = embeddings.strides[0] < embeddings.strides[1]  # as ``_position_major``
    step = _TILE if position_major else max(seq, 1)
    for first in range(0, seq, step):
        n = min(step, seq - first)
        for c0 in range(0, channels, _TILE):
            for c in range(c0, min(c0 + _TILE, channels)):
                row = embeddings[c, offset + first : offset + first + n]
                part = plane[c * seq + first : c * seq + first + n]
                for s in range(n):
                    part[s] = row[s]


def _run_of(out, b, first, n):  # type: ignore[no-untyped-def]
    """``out[b, first : first + n]``, or None when ``out`` is None (in place)."""


@overload(_run_of, jit_options=JIT)
def _ov_run_of(out, b, first, n):  # type: ignore[no-untyped-def]
    if isinstance(out, types.NoneType):
        return lambda out, b, first, n: None
    return lambda out, b, first, n: out[b, first : first + n]


@numba.njit(**JIT)
def _absolute_planes(x, out, embeddings, width, parts, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE in Julia's order when each batch column's (seq, channel)
    plane is one contiguous run: ``x`` and ``out`` are (batch, seq*channels)
    views (C-contiguous when the batch columns are adjacent).  Range over
    units of a group of ``width`` channels and one of ``parts`` blocks of
    batch columns (more than one only to give every thread work when there
    are fewer groups than threads): the group's table rows are laid out as
    the runs are (``_table_plane``), then added to each batch column of the
    block in one loop, so that ``x`` streams through memory while the plane
    stays in cache.  In place, each run is written through the very slice
    it is read from (slices of one array taken twice would look like two
    arrays to the compiler).
    """
    posted(post)
    channels = embeddings.shape[0]
    batch = x.shape[0]
    seq = x.shape[1] // max(channels, 1)
    block = (batch + parts - 1) // parts
    plane = np.empty(min(width, channels) * seq, embeddings.dtype)
    units = (channels + width - 1) // width * parts
    count, size = _blocks_down(start, stop, units, _written(x, out).nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for unit in range(lo, hi):
            group = unit // parts
            c = group * width
            n = (min(c + width, channels) - c) * seq
            _table_plane(embeddings[c : c + width], offset, plane[:n])
            first = (unit - group * parts) * block
            for b in range(first, min(first + block, batch)):
                xs = x[b, c * seq : c * seq + n]
                os = _written(xs, _run_of(out, b, c * seq, n))
                for j in range(n):
                    os[j] = _add(_load(xs[j]), plane[j], os.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_inner_channel(x, out, embeddings, block, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE with the channel axis innermost, on (batch, seq, channel)
    views; range over blocks of ``block`` positions, each walked batch
    column by batch column.  Reads the table one position (column) at a
    time: fast for a position-major table.

    Batch-first C order (channels contiguous) takes blocks of
    ``_POSITION_BLOCK`` positions, so that ``x`` streams through memory; its
    views are C-contiguous, which tells the compiler that the channels are
    adjacent (1.4x faster than the same loop on (seq, channel, batch)
    views).  C order with a batch too short to vectorise (channels strided)
    takes one position at a time, so that its few rows stay in the
    first-level cache.
    """
    posted(post)
    out = _written(x, out)
    batch, seq, channels = x.shape
    count, size = _blocks_down(start, stop, (seq + block - 1) // block, out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for unit in range(lo, hi):
            first = max(unit, 0) * block
            for b in range(batch):
                for s in range(first, min(first + block, seq)):
                    column = embeddings[:, s + offset]
                    for c in range(channels):
                        out[b, s, c] = _add(_load(x[b, s, c]), column[c], out.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_short_batch(x, out, embeddings, batch, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE on C-contiguous arrays of a few batch columns
    (``_SHORT_ROW_BYTES``), whose batch rows are too short to vectorise:
    range over positions; each position's (channel, batch) plane is one run
    of memory (a row of a (seq, channel * batch) view), walked with the
    batch unrolled (``batch``, a tuple of as many Nones, is a length the
    compiler sees as a constant), so that the loop vectorises along
    channels.  Reads the table a position
    (column) at a time: fast for a position-major table."""
    posted(post)
    written = _written(x, out)
    by_position = embeddings.T
    channels = x.shape[1]
    columns = len(batch)
    planes = x.reshape(x.shape[0], channels * columns)
    targets = None if out is None else out.reshape(x.shape[0], channels * columns)
    count, size = _blocks_down(start, stop, x.shape[0], written.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for s in range(lo, hi):
            run = planes[s]
            dest = _written_at(run, targets, s)
            p = s + offset
            for c in range(channels):
                value = by_position[p, c]
                for b in range(columns):
                    j = c * columns + b
                    dest[j] = _add(_load(run[j]), value, written.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_tiles(x, out, embeddings, across, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE where one of ``x`` and ``out`` has the seq axis innermost
    and the other the axis ``across`` (1: channels, 2: batch): range over
    tiles of ``_TILE`` positions; in each, for every index of the third
    axis, the tile's positions of every index along ``across``, the
    positions innermost.  A tile's lines of both arrays along ``across``
    are then read or written whole while they are in the first-level cache.
    """
    posted(post)
    out = _written(x, out)
    seq, channels, batch = x.shape
    count, size = _blocks_down(start, stop, (seq + _TILE - 1) // _TILE, out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for tile in range(lo, hi):
            first = tile * _TILE
            rows = embeddings[:, offset + first : offset + min(first + _TILE, seq)]
            if across == 2:
                for c in range(channels):
                    for b in range(batch):
                        _add_positions(x, out, rows[c], first, c, b)
            else:
                for b in range(batch):
                    for c in range(channels):
                        _add_positions(x, out, rows[c], first, c, b)


@numba.njit(**JIT_INLINED)
def _add_positions(x, out, row, first, c, b):  # type: ignore[no-untyped-def]
    """Positions ``first ..`` of channel ``c`` and batch column ``b``, as many
    as ``row`` holds: the table's run of that channel from position ``first``."""
    for j in range(row.shape[0]):
        s = first + j
        out[s, c, b] = _add(_load(x[s, c, b]), row[j], out.dtype)


@numba.njit(**JIT_INLINED)
def _add_position(x, out, column, s, first, stop):  # type: ignore[no-untyped-def]
    """Channels ``first .. stop-1`` of position ``s``, batch axis innermost,
    from that position's table column."""
    for c in range(first, stop):
        e = column[c]
        for b in range(x.shape[2]):
            out[s, c, b] = _add(_load(x[s, c, b]), e, out.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_inner_batch(x, out, embeddings, parts, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE with the batch axis innermost (C order); outer range over
    positions, each cut into ``parts`` blocks of channels (more than one only
    to give every thread work when there are fewer positions than threads).
    Reads the table one position (column) at a time.

    With whole positions the loop over channels spans the whole axis, so the
    compiler checks the arrays for overlap once per position rather than
    before every batch row (rows of 8-32 float32: 1.1-1.5x faster than the
    range over (seq, channel) rows it replaced)."""
    posted(post)
    out = _written(x, out)
    channels = x.shape[1]
    width = (channels + parts - 1) // parts
    count, size = _blocks_down(start, stop, x.shape[0] * parts, out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        if parts == 1:
            for s in range(lo, hi):
                _add_position(x, out, embeddings[:, s + offset], s, 0, channels)
            continue
        for unit in range(lo, hi):
            s = unit // parts
            first = (unit - s * parts) * width
            _add_position(x, out, embeddings[:, s + offset], s, first, min(first + width, channels))


@numba.njit(**JIT_LOOP)
def _absolute_few_positions(x, out, by_position, channels_inner, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE for a few positions (decoding) on one thread: range over
    positions; inside, every batch column with its channels innermost
    (``channels_inner``: Julia's order with one position, where a column's
    channels are adjacent) or every channel with its batch row innermost (C
    order).  ``by_position`` is the table as (positions, channels), so a
    position's channels are one row: C order (the transpose of the
    position-major table) makes that row contiguous for the compiler, even
    for a table of one position, which is C- and F-contiguous at once
    (Numba types it as C order, and its columns as strided)."""
    posted(post)
    out = _written(x, out)
    channels, batch = x.shape[1], x.shape[2]
    for s in range(start, stop):
        column = by_position[s + offset]
        if not channels_inner:
            _add_position(x, out, column, s, 0, channels)
            continue
        for b in range(batch):
            for c in range(channels):
                out[s, c, b] = _add(_load(x[s, c, b]), column[c], out.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_seq_major(x, out, by_position, offset, start, stop, post):  # type: ignore[no-untyped-def]
    """AbsolutePE on (seq, batch, channel) views of arrays stored position by
    position with their channels innermost (PyTorch's (seq, batch,
    features)); range over positions, each read from ``by_position`` as
    ``_absolute_few_positions`` does.  Such views are C-contiguous where the
    array is, which tells the compiler that the channels are adjacent
    (1.35x faster than the same loop on the (seq, channel, batch) view)."""
    posted(post)
    out = _written(x, out)
    count, size = _blocks_down(start, stop, x.shape[0], out.nbytes)
    for k in range(count):
        lo, hi = _block_down(start, stop, size, k)
        for s in range(lo, hi):
            column = by_position[s + offset]
            for b in range(x.shape[1]):
                for c in range(x.shape[2]):
                    out[s, b, c] = _add(_load(x[s, b, c]), column[c], out.dtype)


_GATHERED_BYTES = 8 << 10
"""The buffer ``_absolute_ids_gathered`` gathers table values into, a block
of channels at a time (8 KiB: within the first-level cache, with the rows
of ``x`` and ``out`` it is added to)."""

_CROWDED = 10
"""The most table rows starting in one set of the first-level cache that a
step reads element by element (``_crowded``).  Read along the batch, one
channel's values at the columns' positions lie a table row apart, and rows
of a multiple of 4 KiB (1024 float32 channels) start in one set, of 2 KiB
in two, of 3 KiB in four: beyond what a set holds (8 or 12 lines), the
reads evict each other, and ``_absolute_ids_gathered`` gathers them
through a buffer instead.  On the AVX2 machine, float32 in C order, ids of
left-padded batches: 10 rather than 8 or 12 made no shape of sixteen (512,
768 and 1024 features, 4-32 columns, 1-4096 positions) more than 1.08x
slower than the rule before it (the buffer wherever a call had more than
16 columns or 2 positions), and most 0.62-0.95x; (512, 768, 32) 13.8 ->
9.4 ms, (8, 768, 4) 43 -> 26 us, (64, 1024, 16) 1.10 -> 1.00 ms.  The
1.08x: decoding steps of 16 columns, which pay the buffer's allocation."""

_SET_BYTES = 64
"""The bytes of a cache line, which the first-level cache's sets index."""

_SETS = 64
"""The sets of the first-level cache (32 KiB of 8 ways, or 48 of 12): an
address's set repeats every 4 KiB."""


@numba.njit(**JIT)
def _crowded(ids, a, row_bytes, seen, counts):  # type: ignore[no-untyped-def]
    """Whether more than ``_CROWDED`` of the table rows that step ``a``'s
    batch columns read (``ids[a]``, rows ``row_bytes`` apart) start in one
    set of the first-level cache, each row counted once (columns at one
    position share its lines).  ``seen`` (``_SETS``, ``_CROWDED``) and
    ``counts`` (``_SETS``) hold the rows counted in each set."""
    counts[:] = 0
    for i in range(ids.shape[1]):
        p = ids[a, i]
        cache_set = p * row_bytes // _SET_BYTES % _SETS
        k = counts[cache_set]
        for j in range(k):
            if seen[cache_set, j] == p:
                break
        else:
            if k == _CROWDED:
                return True
            seen[cache_set, k] = p
            counts[cache_set] = k + 1
    return False


@numba.njit(**JIT_INLINED)
def _add_at_ids(x, out, embeddings, ids, a):  # type: ignore[no-untyped-def]
    """``out[a, c, i] = x[a, c, i] + embeddings[c, ids[a, i]]`` for every
    channel ``c``, the batch columns ``i`` innermost."""
    for c in range(x.shape[1]):
        for i in range(x.shape[2]):
            out[a, c, i] = _add(_load(x[a, c, i]), embeddings[c, ids[a, i]], out.dtype)


@numba.njit(**JIT_LOOP)
def _absolute_ids(x, out, embeddings, channels_inner, ids, start, stop, post):  # type: ignore[no-untyped-def]
    """``out[a, c, i] = x[a, c, i] + embeddings[c, ids[a, i]]`` over
    (outer, channel, inner) views whose axes ``a`` and ``i`` are the
    sequence and batch axes in the order the arrays store them (outermost
    first), range over ``a``; with ``channels_inner`` (``_channels_inner``:
    the channels innermost in memory, or the batch with rows too short to
    vectorise) each ``(a, i)`` reads its table column at once.  Otherwise
    the batch or the sequence axis is innermost (``_ids_loop``), and each
    channel reads its table row at the ids of the step's columns."""
    posted(post)
    out = _written(x, out)
    channels, inner = x.shape[1], x.shape[2]
    for a in range(start, stop):
        if channels_inner:
            for i in range(inner):
                p = ids[a, i]
                for c in range(channels):
                    out[a, c, i] = _add(_load(x[a, c, i]), embeddings[c, p], out.dtype)
        else:
            _add_at_ids(x, out, embeddings, ids, a)


@numba.njit(**JIT)
def _absolute_ids_gathered(x, out, embeddings, channels_inner, ids, start, stop, post):  # type: ignore[no-untyped-def]
    """``_absolute_ids`` on views whose batch axis is innermost in memory,
    read from the position-major table (``channels_inner`` is False, taken
    as ``_absolute_ids`` takes it): a step ``a`` whose columns' table rows
    crowd a set of the first-level cache (``_crowded``) gathers the table's
    values, a block of channels at a time, column by column into a buffer
    laid out as the block of ``x`` (``_GATHERED_BYTES``), then adds it row
    by row; other steps read element by element, as ``_absolute_ids``.
    Compiled with Numba's runtime, which allocates the buffer."""
    posted(post)
    out = _written(x, out)
    channels, inner = x.shape[1], x.shape[2]
    block = max(min(_GATHERED_BYTES // max(inner * embeddings.itemsize, 1), channels), 1)
    gathered = np.empty((block, inner), embeddings.dtype)
    seen = np.empty((_SETS, _CROWDED), np.intp)
    counts = np.empty(_SETS, np.intp)
    for a in range(start, stop):
        if not _crowded(ids, a, embeddings.strides[1], seen, counts):
            _add_at_ids(x, out, embeddings, ids, a)
            continue
        for first in range(0, channels, block):
            n = min(block, channels - first)
            for i in range(inner):
                p = ids[a, i]
                for k in range(n):
                    gathered[k, i] = embeddings[first + k, p]
            for k in range(n):
                for i in range(inner):
                    out[a, first + k, i] = _add(
                        _load(x[a, first + k, i]), gathered[k, i], out.dtype
                    )


def absolute_ids(
    x: np.ndarray,
    out: np.ndarray | None,
    embeddings: np.ndarray,
    by_position: Callable[[int], np.ndarray] | None,
    ids: np.ndarray,
) -> None:
    """``out[s, c, b] = x[s, c, b] + embeddings[c, ids[s, b]]`` over (seq,
    channel, batch) views, ``ids`` (seq, batch) intp within the table: the
    additive encodings' forward pass with one id per position and batch
    column.  ``out`` None adds in place.  The loop follows ``x``'s memory
    order, split over threads along its outermost axis of the two, reading
    the position-major table ``by_position(stop)`` (as ``absolute_forward``)
    where the sequence axis is not innermost: there the ids of the inner
    loop's steps point to positions apart, whose channels that table keeps
    together (on (2048, 512, 16) C-ordered float32, left-padded ids took
    35 ms from ``embeddings``, 19 from it; a copy, 13)."""
    inner = _smallest_stride(x)
    if inner != 0 and by_position is not None and ids.size:
        embeddings = by_position(int(ids.max()) + 1)
    traffic = _traffic(x, out)
    loop, channels_inner = _ids_loop(inner, x, out, embeddings)
    x, out, ids = _ids_views(x, out, ids)
    run_ranges(loop, x.shape[0], traffic, x, out, embeddings, channels_inner, ids)


def decoding_ids(x: np.ndarray, ids: np.ndarray) -> bool:
    """Whether a call on a (seq, channel, batch) ``x`` reading ``ids`` is a
    decoding step that the additive encodings remember (``absolute_ids_direct``):
    3-D, ids one per position and batch column, a few positions."""
    return x.ndim == 3 and ids.ndim == 2 and x.shape[0] <= _FEW_POSITIONS


def absolute_ids_direct(
    x: np.ndarray,
    out: np.ndarray | None,
    table: np.ndarray,
    by_position: np.ndarray | None,
    ids: np.ndarray,
) -> Direct | None:
    """As ``absolute_direct``, for ``absolute_ids`` on (seq, channel, batch)
    arrays like ``x`` and ``out`` with (seq, batch) ``ids`` of that type and
    layout: ``entry(x, out, *args, ids, 0, length, NO_POST)``, reading
    ``by_position`` where given and the loop reads a position at a time
    (the table in F order, which may cover fewer positions: the record's
    ``last`` then says how many, as an offset for ``x``'s sequence length).
    None where the loop has not been compiled yet."""
    inner = _smallest_stride(x)
    embeddings = table if inner == 0 or by_position is None else by_position
    traffic = _traffic(x, out)
    views = _ids_views(x, out, ids)
    loop, channels_inner = _ids_loop(inner, x, out, embeddings)
    args = (embeddings, channels_inner)
    length = views[0].shape[0]
    found = _compiled(loop, views[0], views[1], args, views[2], length, traffic)
    if found is None:
        return None
    entry = found[0] if views[0] is x else _on_ids_views(found[0])
    return entry, args, length, None if embeddings is table else embeddings.shape[1] - x.shape[0]


def _ids_loop(
    inner: int, x: np.ndarray, out: np.ndarray | None, embeddings: np.ndarray
) -> tuple[Any, bool]:
    """The loop of ids per column for a (seq, channel, batch) ``x`` whose
    axis ``inner`` is innermost in memory, into ``out`` (None in place),
    reading ``embeddings``, and its ``channels_inner`` (``_channels_inner``).
    ``_absolute_ids_gathered`` where the batch axis is innermost with rows
    long enough to vectorise, the table is
    position-major (read across its rows: ``_GATHERED_BYTES``), and the
    batch has more columns than ``_CROWDED``, which may then crowd a set of
    the first-level cache.  Float32, the benchmark's ids of a left-padded
    batch (pads of multiples of 128 positions: every row in one set for 512
    channels), on (4096, 512, 16) C-order, 35 ms against 42 element by
    element (a copy: 21).  With the
    sequence innermost (Julia's order), the loop reads the table along its
    positions, and the buffer doubled the time (35 ms to 67)."""
    channels_inner = _channels_inner(x, out, inner)
    if inner == 2 and not channels_inner and _position_major(embeddings):
        if x.shape[2] > _CROWDED:
            return _absolute_ids_gathered, channels_inner
    return _absolute_ids, channels_inner


def _ids_views(
    x: np.ndarray, out: np.ndarray | None, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``x``, ``out`` and ``ids`` as ``_absolute_ids`` runs on them: the
    arrays themselves, or where the batch axis is outermost in memory,
    their (batch, channel, seq) and (batch, seq) views."""
    if _smallest_stride(x[:, :1]) != 0:
        return x, out, ids
    return _batch_outermost(x, out, ids)


def _batch_outermost(
    x: np.ndarray, out: np.ndarray | None, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """The (batch, channel, seq) views of (seq, channel, batch) ``x`` and
    ``out`` (None stays None), and the (batch, seq) view of ``ids``."""
    return x.transpose(2, 1, 0), None if out is None else out.transpose(2, 1, 0), ids.T


def _on_ids_views(entry: Callable[..., None]) -> Callable[..., None]:
    """``entry``, found for the views ``_batch_outermost`` gives, as an
    entry of the arrays themselves and their ids."""

    def call(
        x: np.ndarray,
        out: np.ndarray | None,
        embeddings: np.ndarray,
        channels_inner: bool,
        ids: np.ndarray,
        start: int,
        stop: int,
        post: np.ndarray,
    ) -> None:
        x, out, ids = _batch_outermost(x, out, ids)
        entry(x, out, embeddings, channels_inner, ids, start, stop, post)

    return call


def absolute_forward(
    x: np.ndarray,
    out: np.ndarray | None,
    embeddings: np.ndarray,
    offset: int,
    by_position: Callable[[int], np.ndarray] | None = None,
) -> None:
    """``out[s, c, b] = x[s, c, b] + embeddings[c, s + offset]`` over (seq, channel, batch) views.

    Shared by every additive encoding (sinusoidal, learned): ``embeddings``
    is any (channel, position) view; ``out`` None adds in place.  The
    innermost loop runs along ``x``'s smallest stride (or ``out``'s,
    ``_absolute_inner``); large calls are split over threads.  Only Julia's
    order (seq innermost) reads the table along positions; the other loops read
    all channels of a position at once, from ``by_position(stop)`` if given:
    the same table in F order, covering at least positions ``0 .. stop-1``.
    """
    inner = _absolute_inner(x, out)
    if inner != 0 and by_position is not None:
        embeddings = by_position(offset + x.shape[0])
    traffic = _traffic(x, out)
    kernel, length, view, args = _absolute_loop(x, out, inner, embeddings, traffic)
    if view is not None:
        x, out = view(x), None if out is None else view(out)
    run_ranges(kernel, length, traffic, x, out, *args, offset)


def _absolute_loop(
    x: np.ndarray, out: np.ndarray | None, inner: int, embeddings: np.ndarray, traffic: int
) -> tuple[Any, int, Callable[[np.ndarray], np.ndarray] | None, tuple[Any, ...]]:
    """The AbsolutePE loop for ``x`` into ``out`` (``inner``: the axis it
    runs innermost, ``_absolute_inner``) reading ``embeddings``, as
    ``(kernel, length, view, args)``: ``kernel(view(x), view(out), *args,
    offset, start, stop, post)`` over ``0 .. length`` is the call (``view``
    None: on ``x`` and ``out`` themselves)."""
    seq, channels, batch = x.shape
    few = _absolute_few(x, out, inner, traffic)
    if few is not None:
        return _absolute_few_positions, seq, None, (embeddings.T, few)
    across = _smallest_stride(x)  # where inner is 0 and this is not: tiles
    if inner == 0 and across != 0:
        return _absolute_tiles, (seq + _TILE - 1) // _TILE, None, (embeddings, across)
    short = seq <= _SHORT_SEQUENCE and batch >= _PLANE_BATCH
    if inner == 0 and (short or _position_major(embeddings)) and _planes(x, out):
        width = max(_PLANE_ELEMENTS // max(seq, 1), 1)  # channels laid out at a time
        groups = -(-channels // width)
        parts = min(_parts(traffic, groups), batch)
        plane = partial(_plane, shape=_plane_shape(x))
        return _absolute_planes, groups * parts, plane, (embeddings, width, parts)
    if inner == 0:
        return _absolute_inner_seq, batch * channels, None, (embeddings,)
    if inner == 1 and _seq_outermost(x, 0):
        return _absolute_seq_major, seq, _BY_SEQ, (embeddings.T,)
    if inner == 2 and _unrolled_batch(x, out, _SHORT_ROW_BYTES // _widest(x, out)):
        return _absolute_short_batch, seq, None, (embeddings, (None,) * batch)
    if _channels_inner(x, out, inner):
        block = _POSITION_BLOCK if inner == 1 else 1
        return _absolute_inner_channel, (seq + block - 1) // block, _BY_BATCH, (embeddings, block)
    parts = _parts(traffic, seq)
    return _absolute_inner_batch, seq * parts, None, (embeddings, parts)


_BY_SEQ = methodcaller("transpose", 0, 2, 1)
"""The (seq, batch, channel) view of a (seq, channel, batch) array."""

_BY_BATCH = methodcaller("transpose", 2, 0, 1)
"""The (batch, seq, channel) view of a (seq, channel, batch) array."""


def _absolute_inner(x: np.ndarray, out: np.ndarray | None) -> int:
    """The axis AbsolutePE's loop over ``x`` into ``out`` runs innermost:
    ``x``'s smallest stride, or ``out``'s where the loop follows it
    (``_crossing``).  Into an ``out`` with the sequence innermost from an
    ``x`` stored otherwise, that loop is ``_absolute_tiles``.

    The other loops with the sequence innermost walk the batch outermost,
    and read each line of such an ``x`` once per batch column, a whole
    (seq, channel) plane apart: on one thread, (4096, 512, 16) float32 from
    C order into F took 602-605 ms that way, 418-419 ms following ``x``.
    Following ``x`` writes each of ``out``'s lines an element at a time,
    long before its next (on two threads: 372 ms, 58-116 ms in tiles;
    (100, 512, 32) 2.9 and 1.1 ms, (8, 512, 32) 529 and 107 us, (512, 512,
    1) 1.0 and 0.22 ms).  From the sequence innermost into another axis
    (F order into C) the loop follows ``out`` without tiles, whose stores
    would then be scattered: tiles measured up to 1.7x slower in cache
    ((100, 512, 32), 1.1 against 2.0 ms) and 2x faster only beyond it."""
    inner = _smallest_stride(x)
    along = _crossing(x, out, inner)
    return inner if along is None else along


def _absolute_few(x: np.ndarray, out: np.ndarray | None, inner: int, traffic: int) -> bool | None:
    """``channels_inner`` for ``_absolute_few_positions`` if it is the loop
    for ``x`` (a few positions on one thread, a layout other than Julia's
    with the sequence innermost), else None."""
    if inner == 0 or not _few_positions(x, 0, traffic):
        return None
    return _channels_inner(x, out, inner)


def _parts(traffic: int, units: int) -> int:
    """Into how many parts to cut each of ``units`` units of work so that
    every thread gets some: 1 unless the call is split over threads and has
    fewer units than threads."""
    return 1 if _parallel.serial(traffic) else -(-_parallel.thread_count() // max(units, 1))


def _position_major(embeddings: np.ndarray) -> bool:
    """Whether a (channel, position) table is position-major (each
    position's channels adjacent), which the loop along positions,
    ``_absolute_inner_seq``, would read an element per line: such tables
    take ``_absolute_planes`` at any sequence length, which lays them out
    a tile at a time.  LearnedPE (512, 512, 8) float32 in Julia's order
    took 1.2 ms that way, 9x AbsolutePE's time."""
    return bool(embeddings.strides[0] < embeddings.strides[1])


def _planes(x: np.ndarray, out: np.ndarray | None) -> bool:
    """Whether each batch column's (seq, channel) plane is one run in ``x``
    and in ``out`` (None: in place), so that ``_plane`` views them."""
    shape = _plane_shape(x)
    return all(viewed(a.T, shape, "C") is not None for a in (x, out) if a is not None)


def _plane_shape(x: np.ndarray) -> tuple[int, int]:
    """The shape of ``_plane``'s view of ``x``: (batch, seq*channels)."""
    return x.shape[2], x.shape[0] * x.shape[1]


def _plane(a: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The (batch, seq*channels) view of a (seq, channel, batch) array, of
    ``shape``: a view, never a copy, for arrays laid out as those
    ``_planes`` found to be one run per batch column.  (Reshaped from the
    transpose in C order: ``reshape`` with ``order="F"`` took twice as long,
    0.3 us, at each remembered call.)"""
    return a.T.reshape(shape)


@numba.njit(**JIT_LOOP)
def inverse_frequencies(dim: int, base: float, theta: np.ndarray) -> None:
    """``theta[i] = 1 / base^((2i)/dim)``, Julia's ``1 ./ (base .^ (0:2:dim-1 ./ dim))``."""
    for i in range(theta.size):
        theta[i] = 1.0 / pow_f64(base, (2.0 * i) / dim)


def _sincos_in(angle, table):  # type: ignore[no-untyped-def]
    """Julia's ``sin(T(angle))``, ``cos(T(angle))`` in the table's storage type."""


@overload(_sincos_in, jit_options=JIT)
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


@numba.njit(**JIT_LLVM_INLINED)
def _sincos_f64_covered(angle):  # type: ignore[no-untyped-def]
    """``sincos_f64_moderate`` of ``angle`` and whether it covers the angle."""
    s, c = sincos_f64_moderate(angle)
    return s, c, moderate_f64(angle)


def _sincos_moderate_in(angle, table):  # type: ignore[no-untyped-def]
    """``_sincos_in`` in its branch-free form (float64 tables:
    ``sincos_f64_moderate``; float32 and float16: ``sincos_f32_moderate`` on
    the angle in the table's type), as ``(sin, cos, covered)``: ``covered``
    is False for an angle that form does not cover (``_sincos_in`` then
    gives its sin and cos)."""


@overload(_sincos_moderate_in, jit_options=JIT, inline="always")
def _ov_sincos_moderate_in(angle, table):  # type: ignore[no-untyped-def]
    if table.dtype == types.float64:
        return lambda angle, table: _sincos_f64_covered(angle)
    if table.dtype == types.float32:

        def single_precision(angle, table):  # type: ignore[no-untyped-def]
            x = np.float32(angle)
            s, c = sincos_f32_moderate(x)
            return s, c, moderate_f32(x)

        return single_precision

    def half_precision(angle, table):  # type: ignore[no-untyped-def]
        # Julia: Float16(sin(Float32(x))) on the Float16-rounded angle.
        x = f16_bits_to_f32(f64_to_f16_bits(angle))
        s, c = sincos_f32_moderate(x)
        return f32_to_f16_bits(s), f32_to_f16_bits(c), moderate_f32(x)

    return half_precision


@numba.njit(**JIT_INLINED)
def _put_pair(cos, sin, h1, h2, p, c, s):  # type: ignore[no-untyped-def]
    """Pair (h1, h2)'s table entries at position ``p``: both channels hold ``c`` and ``s``."""
    cos[h1, p] = c
    cos[h2, p] = c
    sin[h1, p] = s
    sin[h2, p] = s


@numba.njit(**JIT_LOOP)
def _rope_tables(theta, scale, cos, sin, pairing, start, stop, post):  # type: ignore[no-untyped-def]
    """Positions ``start .. stop`` of RoPE's tables (``rope_tables``).  Each
    position's pairs first take the branch-free sin and cos, which vectorises
    over the pairs; a position with an angle that form does not cover
    (float32 and float16 tables: |angle| >= Float32(π·2^27), float64:
    |angle| >= 2^20·π/2) takes Julia's full reduction for every pair again."""
    posted(post)
    head = cos.shape[0]
    half = head // 2
    for p in range(start, stop):
        exact = True
        for i in range(half):
            s, c, covered = _sincos_moderate_in((theta[i] * p) * scale, cos)
            exact &= covered
            h1, h2 = _pair(i, half, pairing)
            _put_pair(cos, sin, h1, h2, p, c, s)
        if not exact:
            for i in range(half):
                s, c = _sincos_in((theta[i] * p) * scale, cos)
                h1, h2 = _pair(i, half, pairing)
                _put_pair(cos, sin, h1, h2, p, c, s)
        if head % 2:  # the unpaired channel: angle 0, so it passes through
            sin[head - 1, p], cos[head - 1, p] = _sincos_in(0.0, cos)


def rope_tables(
    theta: np.ndarray,
    scale: float,
    cos: np.ndarray,
    sin: np.ndarray,
    pairing: int | None,
) -> None:
    """Fill RoPE's (head, seq) tables: both channels of pair i hold the sin/cos
    of the angle ``T((theta[i] * p) * scale)`` for position p, as Julia's
    ``T.(compute_frequencies(...) .* scale)`` (stacked on itself for the half
    split; repeated pairwise for interleaved pairs).

    ``cos``/``sin`` are float32/float64, or uint16 for float16 bits.
    """
    cost = theta.size * cos.shape[1] * _SINCOS_COST
    run_ranges(_rope_tables, cos.shape[1], cost, theta, scale, cos, sin, pairing)


@numba.njit(**JIT_LOOP)
def _widened_f16(bits, out, start, stop, post):  # type: ignore[no-untyped-def]
    """Columns ``start .. stop`` of ``widened_f16``."""
    posted(post)
    for j in range(start, stop):
        for i in range(bits.shape[0]):
            out[i, j] = f16_bits_to_f32(bits[i, j])


def widened_f16(table: np.ndarray) -> np.ndarray:
    """A 2-D float16 ``table`` as an F-ordered float32 array (exact), as
    ``table.astype(np.float32, order="F")`` but compiled, and on two threads
    for a large table."""
    out = np.empty(table.shape, np.float32, order="F")
    run_ranges(_widened_f16, table.shape[1], table.nbytes + out.nbytes, table.view(np.uint16), out)
    return out


@numba.njit(**JIT)
def _absolute_rows(frequency, sin_run, cos_run, first):  # type: ignore[no-untyped-def]
    """Positions ``first, first + 1, ...`` of one frequency's rows of
    AbsolutePE's table, into runs of those rows: ``Float32(sin(frequency *
    p))`` and ``Float32(cos(...))``.  The branch-free sin and cos first,
    which vectorise (indexed from 0, so that the compiler sees no negative
    index); if an angle lies beyond them (|angle| >= 2^20·π/2), Julia's full
    reduction for the whole run again."""
    covered = True
    for k in range(sin_run.shape[0]):
        s, c, ok = _sincos_f64_covered(frequency * (first + k))
        covered &= ok
        sin_run[k], cos_run[k] = np.float32(s), np.float32(c)
    if not covered:
        for k in range(sin_run.shape[0]):
            s, c = sincos_f64(frequency * (first + k))
            sin_run[k], cos_run[k] = np.float32(s), np.float32(c)


@numba.njit(**JIT)
def _absolute_table(theta, embeddings, start, stop, post):  # type: ignore[no-untyped-def]
    """Positions ``start .. stop`` of AbsolutePE's table (``absolute_table``),
    along its rows, pair of rows by pair of rows (``_absolute_rows``)."""
    posted(post)
    pairs = embeddings.shape[0] // 2
    for i in range(pairs):
        sin_run, cos_run = embeddings[2 * i, start:stop], embeddings[2 * i + 1, start:stop]
        _absolute_rows(theta[i], sin_run, cos_run, start)
    if embeddings.shape[0] % 2:  # a size of 1: one sin row, its cos values dropped
        last = embeddings[2 * pairs, start:stop]
        _absolute_rows(theta[pairs], last, np.empty_like(last), start)


def absolute_table(theta: np.ndarray, embeddings: np.ndarray) -> None:
    """Fill AbsolutePE's (embedding, length) float32 table: row 2i is
    ``Float32(sin(theta[i] * p))``, row 2i+1 ``Float32(cos(theta[i] * p))``
    (sin and cos in Float64, rounded once), the cos row omitted past the end.
    """
    cost = theta.size * embeddings.shape[1] * _SINCOS_COST
    run_ranges(_absolute_table, embeddings.shape[1], cost, theta, embeddings)


@numba.njit(**JIT_LOOP)
def relative_index(clip: int, offset: int, out: np.ndarray) -> None:
    """``out[i, j] = clip(j - (offset + i), -clip, clip) + clip`` over a
    (length_q, length_k) array."""
    for i in range(out.shape[0]):
        position = offset + i
        for j in range(out.shape[1]):
            out[i, j] = min(max(j - position, -clip), clip) + clip


@numba.njit(**JIT_LOOP)
def gather_rows(table: np.ndarray, index: np.ndarray, out: np.ndarray) -> None:
    """``out[i, j, :] = table[index[i, j], :]``."""
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            row = index[i, j]
            for c in range(table.shape[1]):
                out[i, j, c] = table[row, c]


@numba.njit(**JIT_LOOP)
def t5_bucket(
    relative: np.ndarray, bidirectional: bool, buckets: int, max_distance: int, out: np.ndarray
) -> None:
    """T5's relative-position buckets of a 1-D array, element by element
    (Hugging Face's ``_relative_position_bucket``, its log in float32 as torch's)."""
    if bidirectional:
        buckets //= 2
    exact = buckets // 2
    log_ratio = np.float32(math.log(max_distance / exact))
    for k in range(relative.size):
        n = -relative[k]
        bucket = 0
        if bidirectional:
            if n < 0:
                bucket = buckets
                n = -n
        elif n < 0:
            n = 0
        if n < exact:
            bucket += n
        else:
            scaled = (
                np.float32(math.log(np.float32(n) / np.float32(exact)))
                / log_ratio
                * np.float32(buckets - exact)
            )
            if scaled < _T5_BEYOND:
                bucket += min(exact + int(scaled), buckets - 1)
            else:  # beyond int64 (or NaN, where the log ratio is 0): beyond every bucket
                bucket += buckets - 1
        out[k] = bucket


_T5_BEYOND = 2.0**62
"""A T5 bucket's float term from which it is the last one (``t5_bucket``):
``exact + int(term)`` below it fits int64 (``exact`` is at most 2**62),
and from it on exceeds ``buckets - 1`` (at most ``2 * exact + 1``)."""


@numba.njit(**JIT_LOOP)
def alibi_bias(slopes: np.ndarray, causal: bool, offset: int, out: np.ndarray) -> None:
    """``out[k, q, h] = -(slopes[h] * |offset + q - k|)`` in ``out``'s type
    (slopes already of that type); with ``causal``, ``-inf`` for keys after
    the query (at position ``offset + q``)."""
    for k in range(out.shape[0]):
        for q in range(out.shape[1]):
            position = offset + q
            distance = _cvt(abs(position - k), out.dtype)
            for h in range(out.shape[2]):
                if causal and k > position:
                    out[k, q, h] = -np.inf
                else:
                    out[k, q, h] = -(slopes[h] * distance)
