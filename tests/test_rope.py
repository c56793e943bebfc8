"""RoPE and neg_half against the slow reference, upstream's figures, and Julia's errors."""

from __future__ import annotations

import inspect
import itertools
import math
from dataclasses import dataclass
from functools import partial

import numba
import numpy as np
import pytest

from positional_embeddings import (
    AbsolutePE,
    LearnedPE,
    RoPE,
    _direct,
    _kernels,
    compute_frequencies,
    neg_half,
)
from positional_embeddings import rope as rope_module
from positional_embeddings._julia_math import sincos_f64

import reference
from comparisons import (
    assert_bitwise_equal,
    assert_every_way_of_writing,
    assert_unwritable,
    peak_memory,
    refuse_checked_path,
    split_over,
    ulp_distance,
)

FLOATS = [np.float16, np.float32, np.float64]
INPUT_DTYPES = [np.float16, np.float32, np.float64, np.int64, np.int8, np.uint8, np.bool_]
SHORT_BATCHES = [(3, dtype) for dtype in INPUT_DTYPES] + [
    (2, np.float32),
    (2, np.float16),
    (4, np.float32),
    (4, np.float64),
]
"""Batches of 2-4 columns and input dtypes for the tests of the loops
unrolled along the batch: every dtype once (each pair compiles loops of
its own)."""


def sample(shape, dtype, seed=0) -> np.ndarray:
    """Values with the awkward cases mixed in: zeros of both signs, NaN, Inf,
    extremes, at random places (an eighth of the elements, each special at
    least once where there is room): both halves of a head, and a channel
    and its partner, get them."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = (
            rng.integers(-5, 6, size=shape) if dtype.kind == "i" else rng.integers(0, 6, size=shape)
        )
        x = values.astype(dtype)
        flat = x.reshape(-1)
        flat[: min(2, flat.size)] = [info.min, info.max][: min(2, flat.size)]
        return x
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    specials = np.array(
        [
            0.0,
            -0.0,
            np.nan,
            np.inf,
            -np.inf,
            np.finfo(dtype).max,
            np.finfo(dtype).smallest_subnormal,
        ],
        dtype=dtype,
    )
    flat = x.reshape(-1)
    count = min(flat.size, max(specials.size, flat.size // 8))
    flat[rng.permutation(flat.size)[:count]] = np.resize(specials, count)
    return x


def layouts(x: np.ndarray):
    """The same values as C, F, and a strided (non-contiguous, reversed) view."""
    yield "C", np.ascontiguousarray(x)
    yield "F", np.asfortranarray(x)
    big = np.zeros((*x.shape[:2], 2 * x.shape[2], *x.shape[3:]), x.dtype)
    view = big[:, :, ::-2]
    view[...] = x
    yield "strided", view


def stored(values: np.ndarray, axes) -> np.ndarray:
    """``values`` as a view of a C-contiguous array that holds its axes in the order ``axes``."""
    return np.ascontiguousarray(values.transpose(axes)).transpose(np.argsort(axes))


def stored_part(values: np.ndarray, axes, cut: int, extra: int) -> np.ndarray:
    """``values`` as the first part of a C-contiguous array that holds its
    axes in the order ``axes`` and is ``extra`` longer along axis ``cut`` of
    ``values`` (zeros there): a cache's first positions, a fused
    projection's queries."""
    longer = list(values.shape)
    longer[cut] += extra
    memory = np.zeros([longer[axis] for axis in axes], values.dtype)
    part = memory.transpose(np.argsort(axes))[tuple(slice(n) for n in values.shape)]
    part[...] = values
    return part


# --- tables --------------------------------------------------------------------------


def test_upstream_cached_values():
    """test/runtests.jl "Cached Values Test": RoPE(16, 10) to the 6 figures printed there."""
    rope = RoPE(16, 10)
    first_cos_row = [
        1.0,
        0.540302,
        -0.416147,
        -0.989992,
        -0.653644,
        0.283662,
        0.96017,
        0.753902,
        -0.1455,
        -0.91113,
    ]
    last_sin_row = [
        0.0,
        0.000316228,
        0.000632456,
        0.000948683,
        0.00126491,
        0.00158114,
        0.00189737,
        0.00221359,
        0.00252982,
        0.00284605,
    ]
    np.testing.assert_allclose(rope.cos_cached[0], first_cos_row, atol=5e-6)
    np.testing.assert_allclose(rope.cos_cached[8], first_cos_row, atol=5e-6)
    np.testing.assert_allclose(rope.sin_cached[7], last_sin_row, rtol=5e-6)
    np.testing.assert_allclose(rope.sin_cached[15], last_sin_row, rtol=5e-6)


@pytest.mark.parametrize("T", FLOATS)
@pytest.mark.parametrize(
    "head_size,seq_len,base,scale",
    [
        (16, 10, 10_000, 1.0),
        (2, 1, 10_000, 1.0),
        (64, 300, 500_000, 0.25),
        (8, 50, 10_000.5, 8),
        (32, 20, 1_000_000, 1),
    ],
)
def test_tables_match_reference(head_size, seq_len, base, scale, T):
    """Within 1 ULP of sin/cos taken in float64 on the same angle (4 for float64
    tables: their angles inherit the C pow's last-bit differences from Julia's).
    Bit-exactness against Julia is the parity replay's job."""
    _assert_tables_match_reference(head_size, seq_len, base, scale, T)


@pytest.mark.parametrize("T,scale", [(np.float32, 1e9), (np.float64, 1e6)])
def test_tables_with_angles_beyond_the_branch_free_reduction(T, scale):
    """Positions whose pairs mix angles that the branch-free forms cover
    with angles Julia reduces with Payne-Hanek (float32: 5e6 to 5e7 with 5e8
    and more, beyond ``sincos_f32_moderate``; float64: up to 5e5 with 2e6 and
    more, beyond ``sincos_f64_moderate``): every entry as in
    ``test_tables_match_reference``."""
    _assert_tables_match_reference(8, 6, 10_000, scale, T)


@numba.njit
def _table_forms(angles, table, moderate, covered, exact):
    for k in range(angles.size):
        moderate[k, 0], moderate[k, 1], covered[k] = _kernels._sincos_moderate_in(angles[k], table)
        exact[k, 0], exact[k, 1] = _kernels._sincos_in(angles[k], table)


def test_float16_tables_branch_free_on_every_float16_angle():
    """Float16 tables take the float32 branch-free sin and cos on the
    Float16 angle: for every float16 value as an angle (and angles that
    round to them), the same bits as Julia's full reduction, and covered."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)].astype(np.float64)
    angles = np.concatenate([finite, finite * (1 + 2.0**-13), finite * (1 - 2.0**-12)])
    table = np.empty((1, 1), np.uint16)
    moderate, exact = np.empty((2, angles.size, 2), np.uint16)
    covered = np.empty(angles.size, np.bool_)
    _table_forms(angles, table, moderate, covered, exact)
    assert np.array_equal(moderate, exact)
    assert covered.all()


@numba.njit
def _julia_sincos(angles, sin_out, cos_out):
    for i in range(angles.size):
        sin_out.flat[i], cos_out.flat[i] = sincos_f64(angles.flat[i])


def test_float64_tables_across_the_branch_free_bound_are_julias_bit_for_bit():
    """Float64 tables whose angles run from 0 to 2e7, across 2^20*pi/2 (about
    1.65e6; beyond it Julia reduces with Payne-Hanek, and 1-3% of the sines
    and cosines that ``sincos_f64_moderate`` would give there differ in the
    last bit): every entry is ``sincos_f64`` (Julia's ``sin`` and ``cos``,
    checked against Julia's recorded values) of its angle."""
    head_size, seq_len, scale = 64, 2000, 1e4
    rope = RoPE(head_size, seq_len, scale=scale, T=np.float64)
    angles = compute_frequencies(head_size, seq_len) * scale
    assert angles.max() > 10 * 2.0**20 * np.pi / 2 and (angles < 1e6).mean() > 0.5
    sin, cos = np.empty_like(angles), np.empty_like(angles)
    _julia_sincos(angles, sin, cos)
    half = head_size // 2
    for table, expected in ((rope.cos_cached, cos), (rope.sin_cached, sin)):
        assert_bitwise_equal(table[:half], expected)
        assert_bitwise_equal(table[half:], expected)


def _assert_tables_match_reference(head_size, seq_len, base, scale, T):
    rope = RoPE(head_size, seq_len, base, scale, T=T)
    tolerance = 4 if T == np.float64 else 1
    cos, sin = reference.rope_tables(head_size, seq_len, base, scale, T)
    for actual, expected in ((rope.cos_cached, cos), (rope.sin_cached, sin)):
        assert actual.shape == (head_size, seq_len)
        assert actual.dtype == np.dtype(T)
        assert ulp_distance(actual, expected).max(initial=0) <= tolerance


def test_tables_are_read_only_and_halves_repeat():
    rope = RoPE(8, 6)
    assert not rope.cos_cached.flags.writeable
    with pytest.raises(ValueError):
        rope.cos_cached[0, 0] = 2
    np.testing.assert_array_equal(rope.cos_cached[:4], rope.cos_cached[4:])
    np.testing.assert_array_equal(rope.sin_cached[:4], rope.sin_cached[4:])


def test_base_and_scale_positionally_and_by_keyword():
    by_position = RoPE(8, 6, 500, 0.5)
    by_keyword = RoPE(8, 6, scale=0.5, base=500)
    assert_bitwise_equal(by_position.cos_cached, by_keyword.cos_cached)
    assert not np.array_equal(by_position.cos_cached, RoPE(8, 6).cos_cached)


def test_zero_length_tables():
    rope = RoPE(4, 0)
    assert rope.cos_cached.shape == (4, 0)
    assert RoPE(0, 3).cos_cached.shape == (0, 3)


# --- forward pass --------------------------------------------------------------------


def test_upstream_forward_pass():
    """test/runtests.jl "Forward Pass Test": reshape(Float32.(1:160), 16, 10, 1)."""
    x = np.arange(1, 161, dtype=np.float32).reshape(16, 10, 1, order="F")
    rope = RoPE(16, 10)
    expected = x * rope.cos_cached[:, :, None] + reference.neg_half(x) * rope.sin_cached[:, :, None]
    assert_bitwise_equal(rope(x), expected)


@pytest.mark.parametrize("T", FLOATS)
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_forward_matches_reference_in_every_layout(dtype, T):
    rope = RoPE(8, 5, T=T)
    x = sample((8, 4, 3), dtype, seed=1)
    expected = reference.rope_apply(x, rope.cos_cached, rope.sin_cached)
    for name, view in layouts(x):
        before = view.copy()
        y = rope(view)
        assert_bitwise_equal(y, expected)
        assert_bitwise_equal(view, before)
        if name == "F":
            assert y.flags.f_contiguous
        if name == "C":
            assert y.flags.c_contiguous


@pytest.mark.parametrize("shape", [(6, 1, 1), (6, 3, 2, 2), (6, 2, 1, 3, 2), (2, 7, 5), (6, 4, 0)])
def test_forward_shapes(shape):
    rope = RoPE(shape[0], 7, T=np.float64)
    x = sample(shape, np.float32, seed=2)
    expected = reference.rope_apply(x, rope.cos_cached, rope.sin_cached)
    for _, view in layouts(x):
        assert_bitwise_equal(rope(view), expected)


def test_four_d_view_that_cannot_be_collapsed():
    rope = RoPE(4, 5)
    base = sample((4, 5, 6, 4), np.float32, seed=3)
    x = base[:, :, ::2, 1:3].transpose(0, 1, 3, 2)
    assert_bitwise_equal(
        rope(x), reference.rope_apply(np.array(x), rope.cos_cached, rope.sin_cached)
    )


def test_lists_are_accepted():
    rope = RoPE(2, 2)
    y = rope([[[1.0]], [[2.0]]])  # floats: float64, as Julia's [1.0] is Float64
    assert_bitwise_equal(y, rope(np.array([[[1]], [[2]]], dtype=np.float64)))
    assert rope([[[1]], [[2]]]).dtype == np.float32  # integers take T


def test_from_tables_reproduces_a_rope():
    rope = RoPE(8, 6, T=np.float64)
    again = RoPE.from_tables(8, rope.cos_cached, rope.sin_cached)
    x = sample((8, 6, 2), np.float32, seed=4)
    assert_bitwise_equal(again(x), rope(x))
    assert again.head_size == 8


@pytest.mark.parametrize("layout", ["C", "F", "byte-swapped"])
def test_from_tables_makes_one_copy_of_each_table(layout):
    """The layer's own tables, F-ordered in the machine's byte order, are
    made in one step from tables in any layout: a table in the other byte
    order is not converted first, then copied (two copies held at once)."""
    cos = np.random.default_rng(0).random((64, 4096), np.float32)
    given = {"C": cos, "F": np.asfortranarray(cos), "byte-swapped": cos.astype(">f4")}[layout]
    RoPE.from_tables(64, given, given)  # what a first call sets up once
    rope, peak = peak_memory(lambda: RoPE.from_tables(64, given, given))
    assert peak < 1.5 * 2 * cos.nbytes  # the two copies, and no more than one table's temporaries
    assert_bitwise_equal(rope.cos_cached, cos)
    assert rope.cos_cached.flags.f_contiguous and rope.cos_cached.dtype.isnative


def test_from_tables_uses_both_halves_of_the_tables():
    cos = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    sin = np.arange(12, 24, dtype=np.float32).reshape(4, 3) / 10
    rope = RoPE.from_tables(4, cos, sin)
    x = sample((4, 3, 2), np.float32, seed=5)
    for _, view in layouts(x):
        assert_bitwise_equal(rope(view), reference.rope_apply(x, cos, sin))
    assert rope._shared is None


@pytest.mark.parametrize("interleaved", [False, True])
def test_equal_partner_rows_are_read_once_and_only_when_bitwise_equal(interleaved):
    """Tables built by RoPE hold the same row for both channels of a pair, so
    with the half split the kernels read one; tables from from_tables are
    checked bit by bit (a zero of the other sign is another table: x * -0.0
    is not x * 0.0).  Interleaved pairs always read both (adjacent) rows."""
    rope = RoPE(8, 6, interleaved=interleaved)
    again = RoPE.from_tables(8, rope.cos_cached, rope.sin_cached, interleaved=interleaved)
    assert rope._shared is again._shared is (None if interleaved else True)
    zeros = np.zeros((8, 6), np.float32)
    cos = zeros.copy()
    first, second = (slice(0, 8, 2), slice(1, 8, 2)) if interleaved else (slice(0, 4), slice(4, 8))
    cos[second] = -0.0
    x = sample((8, 6, 3), np.float32, seed=6)
    signed = RoPE.from_tables(8, cos, zeros, interleaved=interleaved)
    assert signed._shared is None
    pairs = (reference.interleaved_pairs if interleaved else reference.half_pairs)(8)
    expected = reference.rope_apply_pairs(x, cos, zeros, pairs)
    one_row = cos.copy()
    one_row[second] = cos[first]
    misread = reference.rope_apply_pairs(x, one_row, zeros, pairs)
    assert not np.array_equal(np.signbit(misread), np.signbit(expected))
    for _, view in layouts(x):
        assert_bitwise_equal(signed(view), expected)
        assert_bitwise_equal(again(view), rope(view))


def test_loops_along_the_head_read_the_tables_packed_in_one():
    """In Julia's order, with equal partner rows, the loops along the head
    read one table holding each pair's cos in its first row and its sin in
    the second, made at the first such call and kept: the same bits as the
    two tables (forward and backward, whose tables are another pair); C
    order and tables with unequal partner rows read the tables as they are."""
    rope = RoPE(16, 40)
    x = sample((16, 40, 4), np.float32, seed=48)
    expected = reference.rope_apply(x, rope.cos_cached, rope.sin_cached)
    assert_bitwise_equal(rope(x), expected)
    assert not rope._packed
    julia_order = np.asfortranarray(x)
    assert_bitwise_equal(rope(julia_order), expected)
    (packed,) = rope._packed.values()
    assert packed.flags.f_contiguous and not packed.flags.writeable
    assert_bitwise_equal(packed[:8], rope.cos_cached[:8])
    assert_bitwise_equal(packed[8:], rope.sin_cached[8:])
    assert_bitwise_equal(rope(julia_order[:, 5:6], offset=5), expected[:, 5:6])
    assert_bitwise_equal(rope.backward(julia_order), rope.backward(x))
    assert (
        len(rope._packed) == 2
        and rope._packed[id(rope._kernel_tables[0]), id(rope._kernel_tables[1])] is packed
    )
    cos, sin = rope.cos_cached.copy(), rope.sin_cached.copy()
    sin[12, 7] = 0.5  # one pair's rows differ at one position
    unequal = RoPE.from_tables(16, cos, sin)
    assert_bitwise_equal(unequal(julia_order), reference.rope_apply(x, cos, sin))
    assert not unequal._packed


def test_bool_input_keeps_julias_strong_zero():
    """false * -Inf is -0.0 in Julia (copysign), NaN in IEEE arithmetic; but
    neg_half(x) of a Bool array is Int, where 0 * Inf is NaN."""
    cos = np.array([[-np.inf], [np.inf]], dtype=np.float32)
    sin = np.array([[1.0], [np.inf]], dtype=np.float32)
    rope = RoPE.from_tables(2, cos, sin)
    y = rope(np.array([False, True]).reshape(2, 1, 1))
    assert_bitwise_equal(
        y, reference.rope_apply(np.array([False, True]).reshape(2, 1, 1), cos, sin)
    )
    assert not np.isnan(y[0, 0, 0])
    assert np.isnan(y[1, 0, 0])


# --- out= and in place ---------------------------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
def test_out_and_in_place(order):
    rope = RoPE(16, 10)
    x = np.asarray(sample((16, 10, 3, 2), np.float32, seed=6), order=order)
    expected = rope(x)
    out = np.empty_like(x)
    assert rope(x, out=out) is out
    assert_bitwise_equal(out, expected)
    inplace = x.copy(order=order)
    assert rope(inplace, out=inplace) is inplace
    assert_bitwise_equal(inplace, expected)


@pytest.mark.parametrize(
    "shape, x_order, out_order, loop",
    [
        ((16, 5, 1), "C", "F", "_rope_inner_seq"),  # C order reads along positions: x's loop
        ((16, 5, 4), "C", "F", "_rope_inner_batch"),  # a batch of 16 bytes: x's loop
        ((16, 5, 16), "C", "F", "_rope_positions_outer_head"),
        ((16, 1, 16), "C", "F", "_rope_positions_outer_head"),
        ((16, 5, 4), "F", "C", "_rope_positions_outer_batch"),
        ((16, 5, 1), "F", "C", "_rope_inner_seq"),
        ((15, 5, 16), "C", "F", "_rope_positions_outer_head"),  # odd head, interleaved
        ((16, 5, 16), "C", "C", "_rope_inner_batch"),
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_out_laid_out_across_x(monkeypatch, shape, x_order, out_order, loop, threads):
    """``out`` in the other memory order than ``x``: the loop follows
    ``out`` where ``x``'s runs within a position span a cache line (64
    bytes), else ``x``; the bits of a new output either way, on one thread
    or split over two, interleaved too, and ``x`` left alone."""
    split_over(monkeypatch, threads)
    head = shape[0]
    layers = [RoPE(head, 9, interleaved=True)] + ([RoPE(head, 9)] if head % 2 == 0 else [])
    for rope in layers:
        x = np.asarray(sample(shape, np.float32, seed=7), order=x_order)
        before = x.copy()
        out = np.empty(shape, np.float32, order=out_order)
        found, _ = _kernels._rope_loop(x, out, 2, _kernels._traffic(x, out))
        assert found.__name__ == loop
        assert rope(x, out=out, offset=2) is out
        assert_bitwise_equal(out, rope(before, offset=2))
        assert_bitwise_equal(x, before)


@pytest.mark.parametrize("batch, dtype", SHORT_BATCHES)
@pytest.mark.parametrize("threads", [1, 2])
def test_short_batches_in_c_order(monkeypatch, batch, dtype, threads):
    """C-contiguous arrays of 2-4 batch columns, whose rows are too short to
    vectorise, run a loop unrolled along the batch (``_rope_short_batch``):
    the oracle's bits allocating, into ``out`` and in place, after an offset
    and with position ids, for the half split, interleaved pairs, an odd
    head and tables whose partner rows differ, on one thread or two; the
    backward pass gives the bits it gives in Julia's order."""
    split_over(monkeypatch, threads)
    cos, sin = sample((16, 40), np.float32, seed=1), sample((16, 40), np.float32, seed=2)
    layers = [
        (RoPE(16, 40), reference.half_pairs(16)),
        (RoPE(16, 40, interleaved=True), reference.interleaved_pairs(16)),
        (RoPE(15, 40, interleaved=True), reference.interleaved_pairs(15)),
        (RoPE.from_tables(16, cos, sin), reference.half_pairs(16)),
    ]
    ids = np.array([3, 0, 39, 7, 7, 1, 2, 30, 12])
    for rope, pairs in layers:
        x = sample((rope.head_size, 9, batch), dtype, seed=batch)
        before = x.copy()
        loop, _ = _kernels._rope_loop(x, None, 0, _kernels._traffic(x, None))
        assert loop is _kernels._rope_short_batch
        for offset, positions in ((0, None), (31, None), (0, ids)):
            columns = np.arange(offset, offset + 9) if positions is None else positions
            expected = reference.rope_apply_pairs(
                x, rope.cos_cached, rope.sin_cached, pairs, columns[:, None]
            )
            call = partial(rope, offset=offset, positions=positions)
            assert_every_way_of_writing(call, x, expected)
        assert_bitwise_equal(x, before)
        if x.dtype.kind == "f":
            assert_bitwise_equal(rope.backward(x), rope.backward(np.asfortranarray(x)))


@pytest.mark.parametrize(
    "shape, order",
    [((16, 9, 5), "C"), ((16, 9, 3), "F"), ((16, 9, 6), "C")],
)
def test_short_batches_only_contiguous_and_up_to_four(shape, order):
    """The loop unrolled along the batch runs C-contiguous arrays of 2-4
    batch columns only: not a batch of 5, nor Julia's order, nor a view cut
    from a larger array, nor ids per batch column."""
    x = np.asarray(sample(shape, np.float32), order=order)
    assert _kernels._rope_loop(x, None, 0, _kernels._traffic(x, None))[0] is not (
        _kernels._rope_short_batch
    )
    cut = sample((16, 9, 3), np.float32)[:, :, :2]
    assert _kernels._rope_loop(cut, None, 0, 0)[0] is _kernels._rope_inner_batch
    short = sample((16, 9, 3), np.float32)
    per_column = np.zeros((9, 3), np.intp)
    assert _kernels._rope_loop(short, None, per_column, 0)[0] is _kernels._rope_inner_batch


def test_bad_out():
    rope = RoPE(4, 4)
    x = np.zeros((4, 4, 2), np.float32)
    with pytest.raises(ValueError, match="shape"):
        rope(x, out=np.empty((4, 4, 3), np.float32))
    with pytest.raises(TypeError, match="dtype float32"):
        rope(x, out=np.empty((4, 4, 2), np.float64))
    with pytest.raises(TypeError, match="numpy array"):
        rope(x, out=[0.0])
    read_only = np.empty_like(x)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        rope(x, out=read_only)
    big = np.zeros((4, 4, 3), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        rope(big[:, :, :2], out=big[:, :, 1:])


@pytest.mark.parametrize(
    ("layer", "memory", "where"),
    [
        (RoPE(8, 16), (8, 5, 4), lambda memory: (memory[:, :, :2], memory[:, :, 2:])),
        (RoPE(8, 16), (8, 6, 3), lambda memory: (memory[:, 3:4], memory[:, 4:5])),
        (RoPE(8, 16), (8, 3, 4, 2), lambda memory: (memory[:, :, :2], memory[:, :, 2:])),
        (
            RoPE(8, 16, T=np.float16),
            (8, 5, 4),
            lambda memory: (memory[..., 1::2], memory[..., ::2]),
        ),
        (AbsolutePE(6, 16), (5, 6, 4), lambda memory: (memory[:, :, ::2], memory[:, :, 1::2])),
    ],
    ids=["batch columns", "next slot", "4-D, other heads", "float16", "every other column"],
)
def test_out_beside_x_in_one_array(layer, memory, where):
    """An ``out`` that shares an array's memory with ``x`` but none of its
    elements (other batch columns, the next slot of a cache) is accepted,
    and only its elements are written; one that shares elements is refused
    (``test_bad_out``)."""
    dtype = getattr(layer, "cos_cached", np.zeros(0, np.float32)).dtype
    memory = np.zeros(memory, dtype)
    within, out = where(memory)
    x = sample(within.shape, dtype, seed=8)
    expected = layer(x)
    within[...] = x
    before = memory.copy()
    for _ in range(3):  # the remembered call, if any, makes the same choice
        out[...] = -1
        assert layer(within, out=out) is out
        assert_bitwise_equal(out, expected)
        assert_bitwise_equal(within, x)
    if isinstance(layer, RoPE):
        assert layer.backward(within, out=out) is out
        assert_bitwise_equal(out, layer.backward(x))
    written = np.zeros(memory.shape, bool)
    where(written)[1][...] = True
    assert_bitwise_equal(memory[~written], before[~written])


# --- errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,kwargs,error,match",
    [
        ((7, 10), {}, ValueError, "Head dimension should be multiple of 2, got 7"),
        ((-2, 10), {}, ValueError, "head_size must be >= 0"),
        ((4, -1), {}, ValueError, "seq_len must be >= 0"),
        ((4.0, 10), {}, TypeError, "head_size must be an integer"),
        ((True, 10), {}, TypeError, "bool"),
        ((4, None), {}, TypeError, "seq_len must be an integer"),
        (
            (4, 10),
            {"T": np.int32},
            TypeError,
            r"^T must be np.float16, np.float32 or np.float64 "
            r"\(Julia's Float16/Float32/Float64\), got ",
        ),
        ((4, 10), {"T": "Float32"}, TypeError, "T must be"),
        ((4, 10), {"T": None}, TypeError, "T must be"),
        ((4, 10), {"base": "10000"}, TypeError, "base must be a real number"),
        ((4, 10), {"scale": 1j}, TypeError, "scale must be a real number"),
        ((4, 10), {"base": -10.0}, ValueError, "base must not be negative"),
        ((4, 10), {"base": 0}, ValueError, "only defined for finite x"),
        ((4, 10), {"scale": np.inf}, ValueError, "only defined for finite x"),
        ((2, 10), {"scale": 1e300, "T": np.float32}, ValueError, "only defined for finite x"),
    ],
)
def test_constructor_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        RoPE(*args, **kwargs)


def test_constructor_accepts_what_julia_accepts():
    assert RoPE(np.int64(4), np.int32(3)).head_size == 4
    assert RoPE(2, 3, base=-5.0).cos_cached.shape == (2, 3)  # exponent 0 only: 1
    assert np.isnan(RoPE(4, 3, base=np.nan).cos_cached[1, 1])
    assert RoPE(4, 1, scale=np.inf).cos_cached.shape == (4, 1)  # only angle 0*Inf = NaN


@pytest.mark.parametrize(
    "shape,error,match",
    [
        ((8, 10), ValueError, "at least 3 dimensions"),
        ((8,), ValueError, "at least 3 dimensions"),
        ((4, 10, 1), ValueError, "Head dimension must match, expected 8, got 4"),
        ((8, 11, 1), ValueError, "Sequence length exceeds maximum length"),
    ],
)
def test_call_errors(shape, error, match):
    rope = RoPE(8, 10)
    x = np.ones(shape, np.float32)
    with pytest.raises(error, match=match):
        rope(x)
    np.testing.assert_array_equal(x, 1)


@pytest.mark.parametrize("dtype", [np.complex64, object, "U3", np.longdouble])
def test_call_rejects_dtypes(dtype):
    if np.dtype(dtype) == np.float64:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError, match="dtype"):
        RoPE(2, 2)(np.zeros((2, 2, 1), dtype=dtype))


def test_from_tables_errors():
    cos = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="shape"):
        RoPE.from_tables(8, cos, cos)
    with pytest.raises(
        TypeError,
        match=r"^cos_cached and sin_cached must have the same dtype, got float32 and float64$",
    ):
        RoPE.from_tables(4, cos, cos.astype(np.float64))
    with pytest.raises(ValueError, match=r"same shape, got \(4, 3\) and \(4, 2\)$"):
        RoPE.from_tables(4, cos, cos[:, :2])
    with pytest.raises(TypeError, match=r"the dtype of cos_cached must be np\.float16,"):
        RoPE.from_tables(4, cos.astype(np.int32), cos)
    with pytest.raises(ValueError, match="multiple of 2"):
        RoPE.from_tables(3, cos[:3], cos[:3])


@pytest.mark.parametrize("field", ["head_size", "interleaved", "cos_cached", "sin_cached"])
def test_fields_are_read_only_as_in_julias_immutable_struct(field):
    """Assigning a field raises (a table assigned was taken and never read:
    the calls went on with the old one); other tables: ``RoPE.from_tables``."""
    rope = RoPE(8, 10)
    x = sample((8, 5, 3), np.float32, seed=41)
    expected = reference.rope_apply(x, rope.cos_cached, rope.sin_cached)
    with pytest.raises(AttributeError, match=field):
        setattr(rope, field, np.ones((8, 10), np.float32))
    if field.endswith("_cached"):  # nor can the tables be made writeable
        assert_unwritable(getattr(rope, field))
    assert_bitwise_equal(rope(x), expected)


# --- neg_half ------------------------------------------------------------------------


def test_upstream_neg_half():
    """test/runtests.jl "neg_half Function Test", both along dim 1 and dim 2 (Julia)."""
    x = np.arange(1.0, 161.0).reshape(16, 10, 1)
    expected = np.concatenate([-x[8:], x[:8]])
    assert_bitwise_equal(neg_half(x), expected)
    transposed = neg_half(x.transpose(1, 0, 2), 1).transpose(1, 0, 2)
    assert_bitwise_equal(transposed, expected)


@pytest.mark.parametrize("dtype", [*INPUT_DTYPES, np.complex128])
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_neg_half_matches_reference(dtype, dim):
    x = (
        sample((5, 4, 3), dtype, seed=7)
        if dtype != np.complex128
        else np.ones((5, 4, 3)) * (1 + 2j)
    )
    for _, view in layouts(x):
        before = view.copy()
        assert_bitwise_equal(neg_half(view, dim), reference.neg_half(x, dim % 3))
        assert_bitwise_equal(view, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("step", [2, 4, 8])
def test_neg_half_of_rows_of_a_matrix(dtype, step):
    """The first rows of a Julia-order matrix (and the first columns of a C
    one), whose halves are rows stepping by ``step`` elements: numpy
    2.1-2.4's ``np.negative`` from such a row into a strided ``out`` reads
    an input stepping by 4 (32-bit) or 8 (64-bit) elements as if
    contiguous, so ``neg_half`` gave the values of other elements."""
    matrix = np.arange(step * 40, dtype=dtype).reshape(step, 40)
    for x, dim in ((np.asfortranarray(matrix)[:2], 0), (np.ascontiguousarray(matrix.T)[:, :2], 1)):
        before = x.copy()
        assert_bitwise_equal(neg_half(x, dim), reference.neg_half(before, dim))
        assert_bitwise_equal(x, before)


@pytest.mark.parametrize("order", ["C", "F"])
def test_neg_half_keeps_the_memory_order_in_the_machines_byte_order(order):
    x = np.asarray(sample((5, 4, 3), np.float32, seed=8), order=order)
    expected = neg_half(x, 1)
    assert expected.flags[f"{order}_CONTIGUOUS"]
    assert_bitwise_equal(neg_half(x.astype(x.dtype.newbyteorder(), order="K"), 1), expected)


def test_neg_half_bool_gives_int64_without_negative_zero():
    y = neg_half(np.array([True, False, True, False]))
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [-1, 0, 1, 0])


def test_neg_half_errors():
    with pytest.raises(ValueError, match=r"dim must be in \[-3, 2\]"):
        neg_half(np.zeros((2, 2, 2)), 3)
    with pytest.raises(ValueError, match=r"dim must be in \[-3, 2\] for a 3-d array \(0-based"):
        neg_half(np.zeros((2, 2, 2)), -4)
    with pytest.raises(TypeError, match="integer"):
        neg_half(np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="0-d"):
        neg_half(np.float32(1))
    with pytest.raises(TypeError, match="numeric"):
        neg_half(np.array(["a", "b"]))


def test_repeated_calls_take_the_direct_path_with_the_same_results():
    """After one checked call, calls of the same layout skip dispatch: same bits,
    same checks on offsets and on out."""
    rope = RoPE(16, 40)
    x = sample((16, 1, 4), np.float32, seed=40)
    full = rope(np.concatenate([x] * 40, axis=1))
    out = np.empty_like(x)
    for position in (0, 7, 39, 3):
        assert_bitwise_equal(rope(x, offset=position), full[:, position : position + 1])
        assert rope(x, out=out, offset=position) is out
        assert_bitwise_equal(out, full[:, position : position + 1])
    assert rope._direct, "the fast path was not primed"
    with pytest.raises(ValueError, match="exceeds maximum length"):
        rope(x, offset=40)
    with pytest.raises(TypeError, match="dtype float32"):
        rope(x, out=np.empty_like(x, dtype=np.float64))
    longer = np.empty((17, 1, 4), np.float32)  # the remembered out's strides, not its shape
    assert longer.strides == out.strides
    with pytest.raises(ValueError, match="shape"):
        rope(x, out=longer)
    big = np.zeros((16, 1, 8), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        rope(big[:, :, :4], out=big[:, :, 2:6])
    in_place = x.copy()
    assert rope(in_place, out=in_place, offset=5) is in_place
    assert_bitwise_equal(in_place, full[:, 5:6])


@pytest.mark.parametrize(
    ("dtype", "T"), [(np.float16, np.float16), (np.float16, np.float32), (np.float32, np.float16)]
)
@pytest.mark.parametrize("order", ["C", "F"])
def test_float16_decoding_steps_take_the_direct_path(monkeypatch, dtype, T, order):
    """Decoding steps with float16 input or tables are remembered as the
    others are: after a checked call of each kind (allocating, ``out=``, in
    place where ``x`` has the output's type), later ones skip the checks
    and give the same bits (NaN, Inf and signed zeros among them)."""
    rope = RoPE(16, 40, T=T)
    x = np.asarray(sample((16, 1, 4), dtype, seed=44), order=order)
    out = np.empty_like(x, dtype=np.promote_types(dtype, T))

    def steps(position: int) -> None:
        columns = slice(position, position + 1)
        expected = reference.rope_apply(x, rope.cos_cached[:, columns], rope.sin_cached[:, columns])
        assert_bitwise_equal(rope(x, offset=position), expected)
        assert rope(x, out=out, offset=position) is out
        assert_bitwise_equal(out, expected)
        if out.dtype == x.dtype:
            y = x.copy(order="K")
            assert rope(y, out=y, offset=position) is y
            assert_bitwise_equal(y, expected)

    steps(5)
    monkeypatch.setattr(RoPE, "_apply", refuse_checked_path)
    for position in (0, 39, 5):
        steps(position)


@dataclass
class Run:
    """One call of ``run_ranges``: its loop, the length of its range, and the
    ranges the loop ran over (in the order they started, which threads decide)."""

    kernel: object
    length: int
    ranges: list[tuple[int, int]]


def runs_recorded(monkeypatch, threads: int) -> list[Run]:
    """Split calls over ``threads`` threads from the smallest size on (or
    never, for one), and list what ``run_ranges`` runs, call by call."""
    split_over(monkeypatch, threads)
    runs: list[Run] = []
    run_ranges = _kernels.run_ranges

    def spy(kernel, length, cost, *args):
        run = Run(kernel, length, [])
        runs.append(run)

        def ran(*arguments):
            run.ranges.append(arguments[-3:-1])
            kernel(*arguments)

        run_ranges(ran, length, cost, *args)

    monkeypatch.setattr(_kernels, "run_ranges", spy)
    return runs


@pytest.mark.parametrize("order", ["C", "F"])
def test_repeated_calls_split_over_threads_take_the_direct_path(monkeypatch, order):
    """Calls large enough to be split over threads are remembered too: after
    a first checked call of each kind (allocating, ``out``, in place), later
    ones skip the checks, still run over two ranges at once, and give the
    same bits."""
    runs = runs_recorded(monkeypatch, 2)
    rope = RoPE(8, 40)
    x = np.asarray(sample((8, 30, 5), np.float32, seed=43), order=order)

    def step(position: int):
        columns = slice(position, position + 30)
        return partial(rope, offset=position), reference.rope_apply(
            x, rope.cos_cached[:, columns], rope.sin_cached[:, columns]
        )

    call, expected = step(10)
    assert_every_way_of_writing(call, x, expected)  # checked, then remembered
    monkeypatch.setattr(RoPE, "_apply", refuse_checked_path)
    runs.clear()
    for position in (0, 3, 10):
        call, expected = step(position)
        assert_every_way_of_writing(call, x, expected)
    assert len(runs) == 9
    for run in runs:
        (start, middle), (resume, stop) = sorted(run.ranges)
        assert (start, stop) == (0, run.length) and middle == resume


@pytest.mark.parametrize("batch", [16, 3, 1])
def test_loops_along_positions_are_remembered_for_the_positions_their_tables_cover(
    monkeypatch, batch
):
    """The loops that read the tables along positions (C order: the batch
    innermost, unrolled for a short batch, or the sequence with one batch
    column) read copies of the
    tables' first positions, grown as calls need more: a remembered call
    serves the offsets its copies cover, and a call beyond them takes the
    checked path once, which grows them and remembers again.  Same bits
    all along."""
    rope = RoPE(8, 64)
    x = sample((8, 10, batch), np.float32, seed=46)
    checked: list[int] = []
    apply = RoPE._apply

    def counted(self, x, out, offset, *rest, **keywords):
        checked.append(offset)
        return apply(self, x, out, offset, *rest, **keywords)

    monkeypatch.setattr(RoPE, "_apply", counted)
    kernel = _kernels._rope_loop(x, None, 0, 2 * x.nbytes)[0]
    loops = {16: _kernels._rope_inner_batch, 3: _kernels._rope_short_batch}
    assert kernel is loops.get(batch, _kernels._rope_inner_seq)
    for offset in (0, 0, 5, 0, 20, 12, 3, 54, 54, 40):
        columns = slice(offset, offset + 10)
        expected = reference.rope_apply(x, rope.cos_cached[:, columns], rope.sin_cached[:, columns])
        assert_bitwise_equal(rope(x, offset=offset), expected)
    # First call: copies of positions 0-9; 5 lies beyond them (0-19 then),
    # 20 too (0-39), 54 too (all 64); the others are remembered calls.
    assert checked == [0, 5, 20, 54]
    assert len(rope._direct) == 1


def test_remembered_calls_in_turn_each_find_their_own_loop(monkeypatch):
    """Decoding steps of two dtypes laid out alike (the same shape and
    strides: float64, and float32 every other element of a longer row),
    allocating and each into an ``out`` of its dtype, taking turns: after
    the first call of each, every call is a remembered one, and each gives
    its own layout's bits."""
    rope = RoPE(8, 40)
    wide = sample((8, 1, 3), np.float64, seed=47)
    narrow = sample((8, 1, 6), np.float32, seed=48)[:, :, ::2]
    assert (wide.shape, wide.strides) == (narrow.shape, narrow.strides)
    out32, out64 = np.empty((8, 1, 3), np.float32), np.empty((8, 1, 3), np.float64)
    calls = [
        (partial(rope, wide, offset=7), wide),
        (partial(rope, narrow, offset=7), narrow),
        (partial(rope, narrow, out32, offset=7), narrow),
        (partial(rope, wide, out64, offset=7), wide),
    ]
    checked: list[np.ndarray] = []
    apply = RoPE._apply
    monkeypatch.setattr(
        RoPE, "_apply", lambda self, x, *rest: checked.append(x) or apply(self, x, *rest)
    )
    for _ in range(3):
        for call, x in calls:
            expected = reference.rope_apply(x, rope.cos_cached[:, 7:8], rope.sin_cached[:, 7:8])
            assert_bitwise_equal(call(), expected)
    assert len(checked) == len(calls)


@pytest.mark.parametrize("batch", [16, 1])
def test_a_remembered_call_covers_only_what_both_table_copies_cover(batch):
    """The backward pass shares the cos table with the forward pass (not the
    sin one): its call grows the copy of cos alone, and a forward call
    remembered after it serves only the positions its shorter sin copy
    covers (it had read that copy past its end)."""
    rope = RoPE(8, 64)
    x = sample((8, 10, batch), np.float32, seed=47)
    rope.backward(x, offset=40)  # the copy of cos now covers 50 positions
    rope(x, offset=0)  # that of sin 10
    fresh = RoPE(8, 64)
    for offset in (30, 54, 0):
        assert_bitwise_equal(rope(x, offset=offset), fresh(x.copy(order="F"), offset=offset))


def compiled_table_types():
    """(loop, parameter, Numba type) of the table arguments (``cos``, ``sin``,
    ``embeddings``, ``by_position``) of every forward loop (those taking
    ``x``) compiled in this process."""
    for name, value in vars(_kernels).items():
        if isinstance(value, numba.core.dispatcher.Dispatcher):
            parameters = list(inspect.signature(value.py_func).parameters)
            if parameters[0] == "x":
                for signature in value.signatures:
                    for parameter, argument in zip(parameters, signature, strict=True):
                        if parameter in {"cos", "sin", "embeddings", "by_position"}:
                            yield name, parameter, argument


@pytest.mark.parametrize("order", ["C", "F"])
def test_loops_read_every_table_read_only(order):
    """Numba compiles a loop again for a writeable table where it has one
    for a read-only table of the same layout.  Every table a loop reads is
    read-only: the backward pass's sin table, float16 RoPE's float32 copies
    and LearnedPE's trainable table (through a read-only view) take the
    loops the forward passes of RoPE and AbsolutePE compiled.  The check
    covers every loop compiled in this process, these calls' included."""
    x = np.asarray(sample((16, 6, 4), np.float32, seed=3), order=order)
    for T, interleaved in itertools.product([np.float32, np.float16], [False, True]):
        rope = RoPE(16, 12, T=T, interleaved=interleaved)
        rope(x)
        rope.backward(x, out=np.empty_like(x))
    learned = LearnedPE(12, 16, seed=3)
    learned(x.transpose(1, 0, 2))
    assert learned.embeddings.flags.writeable  # trained in place: the loops' view is read-only
    assert not [(name, table) for name, table, kind in compiled_table_types() if kind.mutable]


@pytest.mark.parametrize(
    "x",
    [
        np.ones((4, 2, 3), np.float32).transpose(0, 2, 1)[:, :, :1],  # a batch of seq-innermost
        np.lib.stride_tricks.as_strided(np.ones(16, np.float32), (4, 1, 1, 2), (4, 4, 4, 32)),
    ],
    ids=["batch cut", "4-D"],
)
def test_remembered_new_outputs_keep_the_checked_layout(x):
    """A new output from a remembered call has the strides of the first,
    checked call's (``np.empty_like(x)``) along every axis, those of length
    1 included, which numpy's contiguity flags ignore: forward, backward,
    and with position ids."""
    rope = RoPE(4, 10)
    ids = np.arange(x.shape[1])
    for call in (
        partial(rope, offset=1),
        partial(rope.backward, offset=1),
        partial(rope, positions=ids),
    ):
        for _ in range(3):  # checked, then remembered
            assert call(x).strides == np.empty_like(x).strides


def test_layouts_never_remembered_are_not_probed_at_every_call(monkeypatch):
    """Layouts that no call is remembered for (Hugging Face's queries cut
    from a longer cache along both the positions and the heads, whose axes
    merge in no order) are found out at their first call: later calls of
    them neither probe the new output's layout (an array of its size) nor
    search for a loop, and give the same bits."""
    probes, searches = [], []
    same_steps, rope_direct = _direct._same_steps, rope_module.rope_direct
    monkeypatch.setattr(_direct, "_same_steps", lambda *a: probes.append(a) or same_steps(*a))
    monkeypatch.setattr(
        rope_module, "rope_direct", lambda *a: searches.append(a) or rope_direct(*a)
    )
    rope = RoPE(8, 40)
    values = sample((8, 30, 5, 2), np.float32, seed=44)
    cache = np.zeros((2, 40, 6, 8), np.float32)  # (batch, seq, heads, head) in memory
    cache[:, :30, :5] = values.transpose(3, 1, 2, 0)
    hugging_face = cache[:, :30, :5].transpose(3, 1, 2, 0)
    expected = reference.rope_apply(values, rope.cos_cached[:, :30], rope.sin_cached[:, :30])
    assert_bitwise_equal(rope(hugging_face), expected)
    first = len(probes), len(searches)
    for _ in range(3):
        assert_bitwise_equal(rope(hugging_face), expected)
    assert (len(probes), len(searches)) == first
    assert len(rope._direct) == 0


@pytest.mark.parametrize("head, batch", [(16, 2), (16, 4), (14, 9), (16, 17)])
@pytest.mark.parametrize("order, step_order", [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")])
def test_decoding_into_a_cache_slot_takes_the_direct_path(
    monkeypatch, order, step_order, head, batch
):
    """A decoding loop that writes each step into its slot of a KV cache
    (``out`` a view laid out unlike a new output) skips the checked path
    after its first step, with the same bits as the whole sequence at once
    (batches shorter and longer than the columns the loop asks for ahead in
    Julia's order; steps in the cache's memory order and in the other,
    which the loop follows along the cache where the step's runs are long
    enough); a slot of the wrong shape, read-only, or overlapping the step
    is still refused with the checks' errors."""
    rope = RoPE(head, 40)
    steps = sample((head, 40, batch), np.float32, seed=46)
    cache = np.zeros(steps.shape, np.float32, order=order)

    def step(position: int) -> None:
        x = np.array(steps[:, position : position + 1], order=step_order)  # a new token's own
        slot = cache[:, position : position + 1]
        assert rope(x, out=slot, offset=position).base is cache

    step(0)
    with monkeypatch.context() as patched:
        patched.setattr(RoPE, "_apply", refuse_checked_path)
        for position in range(1, 40):
            step(position)
    assert_bitwise_equal(cache, rope(steps))
    x = np.array(steps[:, 3:4], order=step_order)
    with pytest.raises(ValueError, match="shape"):
        rope(x, out=cache[:, 3:5])  # two slots: the strides of one
    read_only = cache.copy(order="K")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        rope(x, out=read_only[:, 3:4])
    memory = np.zeros(cache.size + x.size, np.float32)
    overlapping = np.lib.stride_tricks.as_strided(memory[1:], x.shape, cache[:, 3:4].strides)
    within = np.lib.stride_tricks.as_strided(memory, x.shape, x.strides)
    with pytest.raises(ValueError, match="overlaps"):
        rope(within, out=overlapping)


def _decoding_step(layout: str) -> np.ndarray:
    """A (head, 1, heads, batch...) decoding step of RoPE(8, 12), laid out as ``layout``."""
    values = sample((8, 1, 3, 2, 2) if layout == "5-D, F order" else (8, 1, 3, 2), np.float32, 41)
    if layout == "(batch, seq, heads, head) reversed":  # Hugging Face's queries
        return stored(values, (3, 1, 2, 0))
    if layout == "cut from a fused projection":  # heads, then batch, one run each
        fused = np.zeros((24, 1, 3, 2), np.float32, order="F")
        fused[8:16] = values
        return fused[8:16]
    if layout == "batch axes that do not merge":
        wide = np.zeros((8, 1, 3, 4), np.float32, order="F")
        wide[..., ::2] = values
        return wide[..., ::2]
    return np.asarray(values, order="F" if layout == "5-D, F order" else "C")


def _steps(a: np.ndarray) -> list[int]:
    """The strides of ``a`` along its axes longer than 1 (its memory order)."""
    return [stride for n, stride in zip(a.shape, a.strides, strict=True) if n > 1]


def _rope_step(rope: RoPE, x: np.ndarray, position: int):
    """``rope`` at ``position`` as a function of ``(x, out=None)``, and what it gives for ``x``."""
    columns = slice(position, position + 1)
    return partial(rope, offset=position), reference.rope_apply(
        x, rope.cos_cached[:, columns], rope.sin_cached[:, columns]
    )


@pytest.mark.parametrize(
    "layout",
    [
        "C order",
        "(batch, seq, heads, head) reversed",
        "cut from a fused projection",
        "5-D, F order",
        "batch axes that do not merge",
    ],
)
def test_decoding_steps_of_more_than_three_dims_take_the_direct_path(monkeypatch, layout):
    """Steps with several batch axes, as PyTorch-shaped queries arrive: after
    a first checked call of each kind (allocating, ``out``, in place), later
    ones skip the checks through 3-D views of their merged batch axes, with
    the same bits; a layout whose batch axes merge in neither order too,
    through its (head, heads, batch) view (``exchanged``)."""
    rope = RoPE(8, 12)
    x = _decoding_step(layout)
    call, expected = _rope_step(rope, x, 11)  # the whole table
    assert_every_way_of_writing(call, x, expected)
    checked, calls = RoPE._apply, []
    monkeypatch.setattr(RoPE, "_apply", lambda *a, **k: calls.append(a) or checked(*a, **k))
    for position in (4, 0, 10):
        call, expected = _rope_step(rope, x, position)
        assert_every_way_of_writing(call, x, expected)
        assert _steps(call(x)) == _steps(np.empty_like(x))  # x's memory order
    assert not calls
    with pytest.raises(ValueError, match="exceeds maximum length"):
        rope(x, offset=12)


def test_ids_per_column_of_several_batch_axes_are_checked_every_time(monkeypatch):
    """Position ids per position and batch column of a 4-D step are ids the
    remembered 3-D loops do not read: every call is checked, and right, and
    none searches for a loop to remember (which costs tens of microseconds)."""
    rope = RoPE(8, 12)
    x = _decoding_step("C order")
    checked, calls = RoPE._apply, []
    monkeypatch.setattr(RoPE, "_apply", lambda *a, **k: calls.append(a) or checked(*a, **k))
    monkeypatch.setattr(_kernels, "_compiled", lambda *a: pytest.fail("searched for a loop"))
    for seed in range(3):
        ids = np.random.default_rng(seed).integers(0, 12, x.shape[1:])
        expected = reference.rope_apply_pairs(
            x, rope.cos_cached, rope.sin_cached, reference.half_pairs(8), ids
        )
        assert_bitwise_equal(rope(x, positions=ids), expected)
    assert len(calls) == 3


def hugging_face_queries(values: np.ndarray, cut: bool) -> np.ndarray:
    """``values`` (head, seq, heads, batch...) as a view of a C-contiguous
    (batch..., seq, heads, head) array (Hugging Face's queries with their
    axes reversed), or with ``cut``, of the first ``seq`` positions of a
    longer one (a cache), whose other positions are zeros."""
    axes = (*range(values.ndim - 1, 2, -1), 1, 2, 0)
    return stored_part(values, axes, 1, 3) if cut else stored(values, axes)


def assert_in_place_on_the_cut(step, values: np.ndarray, expected: np.ndarray) -> None:
    """``step(y, out=y)`` on queries cut from a cache gives ``expected`` and
    leaves the cache's other positions as they were."""
    y = hugging_face_queries(values, cut=True)
    assert step(y, out=y) is y
    assert_bitwise_equal(y, expected)
    assert not y.base[..., values.shape[1] :, :, :].any()


@pytest.mark.parametrize(
    ("batch", "cut"),
    [((), False), ((2,), False), ((2, 3), False), ((2,), True), ((2, 3), True)],
    ids=["3-D", "4-D", "5-D", "4-D cut from a cache", "5-D cut from a cache"],
)
def test_hugging_face_queries_run_as_one_loop_and_are_remembered(monkeypatch, batch, cut):
    """(head, seq, heads, batch...) views of (batch..., seq, heads, head)
    arrays (Hugging Face's queries with their axes reversed), whole or cut
    from a cache (then their seq axis merges with their heads, not with
    their batch axes: (head, heads*seq, batch) views), run as one loop
    whatever their batch axes, with no array of ids built for them; after a
    first checked call of each kind (allocating or ``out``, in place, in
    place on the cut itself), later ones at other offsets and ids skip the
    checks.  The oracle's bits every time."""
    runs = runs_recorded(monkeypatch, 1)
    head, seq, heads = 8, 5, 3
    rope = RoPE(head, 40)
    values = sample((head, seq, heads, *batch), np.float32, seed=47)
    x = hugging_face_queries(values, cut)
    rng = np.random.default_rng(47)
    kinds = [np.arange(seq) + 9, rng.integers(0, 40, seq)]
    if not batch:  # ids per column are remembered for one batch axis
        kinds.append(rng.integers(0, 40, (seq, heads)))

    def call(where: np.ndarray):
        positions = where.reshape(seq, *where.shape[1:], *(1,) * (x.ndim - 1 - where.ndim))
        expected = reference.rope_apply_pairs(
            x, rope.cos_cached, rope.sin_cached, reference.half_pairs(head), positions
        )
        if where.ndim == 1 and np.array_equal(where, np.arange(seq) + where[0]):
            return partial(rope, offset=int(where[0])), expected
        return partial(rope, positions=where), expected

    def every_way(step, expected) -> None:
        assert_every_way_of_writing(step, x, expected)
        if cut:
            assert_in_place_on_the_cut(step, values, expected)

    for where in kinds:
        runs.clear()
        step, expected = call(where)
        every_way(step, expected)
        # Checked, each kind once: the new output, out=, in place (and on the cut).
        assert [(run.kernel, run.length) for run in runs] == [
            (_kernels._rope_inner_head, heads * seq * math.prod(batch))
        ] * (3 + cut)
    if batch:  # ids per column of several batch axes: checked at every call, one loop still
        runs.clear()
        step, expected = call(rng.integers(0, 40, x.shape[1:]))
        every_way(step, expected)
        assert {run.kernel for run in runs} == {_kernels._rope_inner_head}
        assert len(runs) == 3 + cut
    monkeypatch.setattr(RoPE, "_apply", refuse_checked_path)
    for where in [np.arange(seq), np.arange(seq) + 35, *(kind[::-1].copy() for kind in kinds[1:])]:
        step, expected = call(where)
        every_way(step, expected)


@pytest.mark.parametrize("part", ["cache", "projection"])
def test_decoding_steps_cut_from_larger_arrays_run_as_one_loop_and_are_remembered(
    monkeypatch, part
):
    """A decoding step (head, 1, heads, batch) of Hugging Face's layout whose
    heads and batch axes do not merge, cut from a larger array (``cache``: a
    key at its position of a (batch, seq, heads, head) cache, rotated there
    in place; ``projection``: the queries of a fused (batch, 1, 3*heads,
    head) projection), runs as one loop on a (head, heads, batch) view, not
    one per batch column; after a first checked call of each kind
    (allocating, in place), later ones at other offsets skip the checks.
    The oracle's bits every time, and nothing else of the larger array
    written."""
    runs = runs_recorded(monkeypatch, 1)
    head, heads, batch = 8, 3, 4
    rope = RoPE(head, 40)
    if part == "cache":
        memory = np.full((batch, 40, heads, head), 5, np.float32)
        where_in_memory: tuple[slice, ...] = (slice(None), slice(7, 8))
    else:
        memory = np.full((batch, 1, 3 * heads, head), 5, np.float32)
        where_in_memory = (slice(None), slice(None), slice(0, heads))
    x = memory[where_in_memory].transpose(3, 1, 2, 0)
    rest = np.ones(memory.shape, bool)
    rest[where_in_memory] = False
    values = sample(x.shape, np.float32, seed=48)

    def steps(offsets: list[int], checked: int) -> None:
        for offset in offsets:
            where = slice(offset, offset + 1)
            expected = reference.rope_apply(
                values, rope.cos_cached[:, where], rope.sin_cached[:, where]
            )
            runs.clear()
            x[...] = values
            assert_bitwise_equal(rope(x, offset=offset), expected)
            assert rope(x, offset=offset, out=x) is x
            assert_bitwise_equal(x, expected)
            assert (memory[rest] == 5).all()
            assert len(runs) == checked

    steps([5], checked=2)
    monkeypatch.setattr(RoPE, "_apply", refuse_checked_path)
    steps([0, 6, 39], checked=0)
