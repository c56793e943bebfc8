"""Beyond Julia (opt-in): offsets, position ids, interleaved pairs, odd heads,
backward passes, layout conversion, AbsolutePE offsets and batch-first input."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

from positional_embeddings import AbsolutePE, LearnedPE, RoPE, _direct, _kernels, absolute
from positional_embeddings import learned as learned_module
from positional_embeddings.layouts import half_to_interleaved, interleaved_to_half

import reference
from comparisons import (
    assert_bitwise_equal,
    assert_every_way_of_writing,
    refuse_checked_path,
    split_over,
    ulp_distance,
)
from test_rope import INPUT_DTYPES, layouts, runs_recorded, sample, stored

# --- positions -----------------------------------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
def test_offset_equals_slicing_a_longer_sequence(order):
    rope = RoPE(16, 40)
    long = np.asarray(sample((16, 40, 3), np.float32, seed=21), order=order)
    full = rope(long)
    for start, length in [(0, 40), (7, 1), (39, 1), (10, 20)]:
        part = np.asarray(long[:, start : start + length], order=order)
        assert_bitwise_equal(rope(part, offset=start), full[:, start : start + length])


@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_position_ids_per_position_and_per_column(dtype):
    rope = RoPE(8, 12, T=np.float64)
    x = sample((8, 5, 2, 3), dtype, seed=22)
    ids = np.array([11, 0, 3, 3, 7])
    expected = reference.rope_apply_pairs(
        x, rope.cos_cached, rope.sin_cached, reference.half_pairs(8), ids[:, None, None]
    )
    per_column = np.random.default_rng(1).integers(0, 12, size=(5, 2, 3))
    expected_columns = reference.rope_apply_pairs(
        x, rope.cos_cached, rope.sin_cached, reference.half_pairs(8), per_column
    )
    for _, view in layouts(x):
        assert_bitwise_equal(rope(view, positions=ids), expected)
        assert_bitwise_equal(rope(view, positions=per_column), expected_columns)


def test_position_ids_equal_to_an_offset():
    rope = RoPE(8, 12)
    x = sample((8, 4, 3), np.float32, seed=23)
    assert_bitwise_equal(rope(x, positions=np.arange(5, 9)), rope(x, offset=5))
    for zero in (np.int64(0), np.uint8(0)):  # the default offset, of any integer type
        assert_bitwise_equal(rope(x, positions=np.arange(5, 9), offset=zero), rope(x, offset=5))


@pytest.mark.parametrize("method", ["__call__", "backward"])
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("remembered", [False, True])
@pytest.mark.parametrize("per_column", [False, True])
def test_position_ids_stored_where_the_call_writes_are_read_first(
    method, in_place, remembered, per_column
):
    """Ids that lie in ``out``'s memory (in ``x``'s, in place) are read as
    they were before the call, as numpy reads an input that overlaps its
    output: the loop once wrote over them while it read them, then indexed
    the tables with what it had written (a crash).  The same from a layer
    that remembers calls of these layouts."""
    rope = RoPE(8, 16, T=np.float64)
    shape, ids_shape = (8, 2, 3), ((2, 3) if per_column else (2,))
    memory = np.zeros(48)
    written = memory.reshape(shape, order="F")
    ids = memory.view(np.intp)[30 : 30 + np.prod(ids_shape)].reshape(ids_shape)
    x = written if in_place else np.empty(shape, order="F")
    x[...] = sample(shape, np.float64, seed=26)
    ids[...] = np.arange(ids.size).reshape(ids_shape) % 16
    expected = getattr(RoPE(8, 16, T=np.float64), method)(x.copy(), positions=ids.copy())
    call = getattr(rope, method)
    if remembered:  # arrays of the same layouts, apart
        other = np.empty(shape, order="F")
        call(other, out=other if in_place else np.empty(shape, order="F"), positions=0 * ids)
    assert call(x, out=written, positions=ids) is written
    assert_bitwise_equal(written, expected)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("per_column", [False, True])
def test_repeated_calls_with_position_ids_take_the_direct_path(monkeypatch, order, per_column):
    """Decoding a batch whose sequences sit at different positions: after one
    checked call, calls with ids of the same shape and layout skip the
    checks' slow path, read each call's own ids (of any integer dtype, read
    as the checks convert them; a list or a tuple of Python ints too), and
    still refuse ids out of range, and lists that are not of integers."""
    rope = RoPE(16, 40)
    x = np.asarray(sample((16, 1, 6), np.float32, seed=24), order=order)
    rng = np.random.default_rng(24)
    shape = (1, 6) if per_column else (1,)
    for _ in range(6):
        ids = rng.integers(0, 40, size=shape)
        columns = np.broadcast_to(ids, (1, 6))
        expected = reference.rope_apply_pairs(
            x, rope.cos_cached, rope.sin_cached, reference.half_pairs(16), columns
        )
        y = assert_every_way_of_writing(partial(rope, positions=ids), x, expected)
        with monkeypatch.context() as patch:
            patch.setattr(RoPE, "_apply", refuse_checked_path)
            for dtype in (np.int32, np.uint8, np.uint64):
                assert_bitwise_equal(rope(x, positions=ids.astype(dtype)), expected)
            assert_bitwise_equal(rope(x, positions=ids.tolist()), expected)
            assert_bitwise_equal(rope(x, positions=tuple(ids.tolist())), expected)
    for target, a in ((_direct.NEW, x), (_direct.IN_PLACE, y)):
        assert (a.shape, a.strides, a.dtype, target, ids.shape, ids.strides, ids.dtype) in (
            rope._direct
        )
    for bad in (-1, 40, np.iinfo(np.uint64).max):
        with pytest.raises(ValueError, match="positions must lie"):
            rope(x, positions=np.full(shape, bad))
        # Python ints beyond int64 are out of Julia's Int before any range.
        beyond = "positions must fit in int64" if bad > 40 else "positions must lie"
        with pytest.raises(ValueError, match=beyond):
            rope(x, positions=np.full(shape, bad).tolist())
    for bad in (1.0, True):
        with pytest.raises(TypeError, match="positions must be integers"):
            rope(x, positions=np.full(shape, bad, dtype=object).tolist())
    with pytest.raises(ValueError, match=f"positions must fit in int64, got {2**70}$"):
        rope(x, positions=np.full(shape, 2**70, dtype=object).tolist())
    with pytest.raises(ValueError, match="inhomogeneous"):
        rope(x, positions=[[1], [2, 3]] if per_column else [[1], 2])
    with pytest.raises(TypeError, match="positions must be integers"):
        rope(x, positions=np.ones(shape, bool))
    with pytest.raises(TypeError, match="positions must be integers"):
        rope(x, positions=np.ones(shape))


@pytest.mark.parametrize("ids", [[], (), np.array([]), np.empty((0, 2))])
def test_no_positions_as_numpy_makes_them_of_an_empty_list(ids):
    """A sequence of length 0 takes ids of shape (0,) or (0, batch) as
    ``[]`` gives them: numpy makes them float64, which no id can be."""
    rope = RoPE(4, 8)
    x = np.ones((4, 0, 2), np.float32)
    for method in (rope, rope.backward):
        assert method(x, positions=ids).shape == (4, 0, 2)
    with pytest.raises(TypeError, match="positions must be integers, got dtype float64"):
        rope(np.ones((4, 1, 2)), positions=[0.0])


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint8, np.uint64])
def test_numpy_integer_offsets_take_the_direct_path(monkeypatch, kind):
    """A position read from an array (``for p in np.arange(n)``, ``lengths[b]``)
    is a numpy integer: decoding steps given one skip the checks as with a
    Python int, with the same bits, for each layer that takes an offset;
    bools, numpy's too, and offsets out of range still go to the checks,
    which refuse them, as they refuse a ``np.timedelta64`` (numpy counts it
    among its integers: ``isinstance(np.timedelta64(3, "s"), np.integer)``)."""
    rope, pe, learned = RoPE(16, 40), AbsolutePE(16, 40), LearnedPE(40, 16, seed=3)
    x = sample((16, 1, 4), np.float32, seed=25)
    steps = [(rope, x), (pe, x.reshape(1, 16, 4)), (learned, x.reshape(1, 16, 4))]
    expected = {}
    for layer, step in steps:
        for position in (0, 7, 39):
            expected[id(layer), position] = layer(step, offset=position)
            layer(step, out=np.empty_like(step), offset=position)
    with monkeypatch.context() as patch:
        patch.setattr(RoPE, "_apply", refuse_checked_path)
        patch.setattr(absolute, "add_embeddings", refuse_checked_path)
        patch.setattr(learned_module, "add_embeddings", refuse_checked_path)
        for layer, step in steps:
            for position in (0, 7, 39):
                assert_bitwise_equal(
                    layer(step, offset=kind(position)), expected[id(layer), position]
                )
                out = np.empty_like(step)
                assert layer(step, out=out, offset=kind(position)) is out
                assert_bitwise_equal(out, expected[id(layer), position])
    for layer, step in steps:
        for bad in (True, np.True_, np.timedelta64(3, "s"), np.timedelta64(3, "D")):
            with pytest.raises(TypeError, match="offset must be an integer"):
                layer(step, offset=bad)
    rope.backward(x, offset=5)
    with pytest.raises(TypeError, match="offset must be an integer"):
        rope.backward(x, offset=np.timedelta64(3, "s"))
    rope(x, positions=[0])
    with pytest.raises(TypeError, match="offset must be an integer"):
        rope(x, positions=[0], offset=np.timedelta64(0, "s"))
        with pytest.raises(ValueError, match="exceeds maximum length"):
            layer(step, offset=kind(40))


def test_the_direct_paths_range_check_reads_every_id_in_any_layout():
    """``ids_within`` is the range check of remembered calls with ids: both
    bounds, every element of 1-D, 2-D, F-ordered and strided ids."""
    grid = np.arange(12, dtype=np.intp).reshape(3, 4)
    for ids in (grid, np.asfortranarray(grid), grid[:, ::2], grid.T, grid[0]):
        top = int(ids.max())
        assert _kernels.ids_within(ids, top + 1)
        assert not _kernels.ids_within(ids, top)
        assert not _kernels.ids_within(ids - (int(ids.min()) + 1), top + 1)  # one below 0
    assert _kernels.ids_within(np.empty((0, 3), np.intp), 0)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"offset": 8}, ValueError, "Sequence length exceeds maximum length"),
        ({"offset": -1}, ValueError, "offset must be >= 0"),
        ({"offset": 1.0}, TypeError, "offset must be an integer"),
        ({"positions": [0, 1, 12]}, ValueError, r"positions must lie in \[0, 12\)"),
        ({"positions": [0, -1, 2]}, ValueError, "positions must lie"),
        ({"positions": [0.0, 1.0, 2.0]}, TypeError, "positions must be integers"),
        ({"positions": [0, 1]}, ValueError, "positions must have shape"),
        ({"positions": [0, 1, 2], "offset": 1}, ValueError, "either offset or positions"),
    ],
)
def test_position_errors(kwargs, error, match):
    rope = RoPE(4, 12)
    x = np.zeros((4, 3, 2), np.float32)
    if "offset" in kwargs and kwargs["offset"] == 8:
        x = np.zeros((4, 5, 2), np.float32)
    with pytest.raises(error, match=match):
        rope(x, **kwargs)


# --- interleaved pairs ---------------------------------------------------------------


@pytest.mark.parametrize("T", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_interleaved_matches_reference(dtype, T):
    rope = RoPE(8, 6, T=T, interleaved=True)
    x = sample((8, 5, 3), dtype, seed=24)
    expected = reference.rope_apply_pairs(
        x, rope.cos_cached, rope.sin_cached, reference.interleaved_pairs(8)
    )
    for _, view in layouts(x):
        assert_bitwise_equal(rope(view), expected)


def test_interleaved_tables_are_the_half_tables_reordered():
    half, inter = RoPE(16, 9), RoPE(16, 9, interleaved=True)
    assert_bitwise_equal(inter.cos_cached, half_to_interleaved(half.cos_cached))
    assert_bitwise_equal(inter.sin_cached, half_to_interleaved(half.sin_cached))


@pytest.mark.parametrize("order", ["C", "F"])
def test_layout_conversion_makes_the_two_pairings_agree(order):
    x = np.asarray(sample((16, 9, 4), np.float32, seed=25), order=order)
    half, inter = RoPE(16, 9), RoPE(16, 9, interleaved=True)
    assert_bitwise_equal(inter(x), half_to_interleaved(half(interleaved_to_half(x))))
    assert_bitwise_equal(half_to_interleaved(interleaved_to_half(x)), x)


@pytest.mark.parametrize("convert", [interleaved_to_half, half_to_interleaved])
@pytest.mark.parametrize("order", ["C", "F"])
def test_layout_conversion_keeps_the_memory_order_in_the_machines_byte_order(convert, order):
    """As every other output: ``a``'s memory order, the machine's byte order."""
    a = np.asarray(sample((6, 5, 2), np.float32, seed=27), order=order)
    swapped = a.astype(a.dtype.newbyteorder(), order="K")
    for axis, heads in [(0, 1), (0, 3), (1, 1), (2, 1)]:
        expected = convert(a, axis=axis, heads=heads)
        assert expected.flags[f"{order}_CONTIGUOUS"]
        assert_bitwise_equal(convert(swapped, axis=axis, heads=heads), expected)


def test_weight_permutation_is_hugging_faces_permute():
    """HF's convert_llama_weights_to_hf.py: w.view(n, d/n/2, 2, d).transpose(1, 2).reshape(d, d)."""
    heads, head_size, model = 4, 6, 24
    w = np.arange(model * model, dtype=np.float32).reshape(model, model)
    hf = w.reshape(heads, head_size // 2, 2, model).transpose(0, 2, 1, 3).reshape(model, model)
    assert_bitwise_equal(interleaved_to_half(w, axis=0, heads=heads), hf)
    assert_bitwise_equal(half_to_interleaved(hf, axis=0, heads=heads), w)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_odd_interleaved_head_passes_the_last_channel_through(dtype):
    rope = RoPE(7, 5, interleaved=True)
    x = sample((7, 5, 2), dtype, seed=26)
    y = rope(x)
    expected = reference.rope_apply_pairs(
        x, rope.cos_cached, rope.sin_cached, reference.interleaved_pairs(7)
    )
    for _, view in layouts(x):
        assert_bitwise_equal(rope(view), expected)
    assert_bitwise_equal(y[6], x[6].astype(np.float32))
    assert rope.cos_cached[6].tolist() == [1.0] * 5 and rope.sin_cached[6].tolist() == [0.0] * 5


def test_odd_interleaved_tables_must_pass_the_last_channel_through():
    """``from_tables`` with an odd interleaved head: the last channel has no
    partner and passes through, so tables whose last rows say otherwise
    (cos 2, say, which was never applied) are refused, naming the rows."""
    rope = RoPE(5, 4, interleaved=True)
    again = RoPE.from_tables(5, rope.cos_cached, rope.sin_cached, interleaved=True)
    x = sample((5, 4, 2), np.float32, seed=27)
    assert_bitwise_equal(again(x), rope(x))
    for name, row in (("cos_cached", 0), ("sin_cached", 1)):
        tables = [rope.cos_cached.copy(), rope.sin_cached.copy()]
        tables[row][4, 2] = 2.0
        with pytest.raises(ValueError, match=rf"{name}\[4\] must be {1 - row}\.0 throughout"):
            RoPE.from_tables(5, *tables, interleaved=True)


def test_odd_head_still_needs_interleaved():
    with pytest.raises(ValueError, match="multiple of 2, got 7"):
        RoPE(7, 5)
    with pytest.raises(TypeError, match="interleaved must be True or False"):
        RoPE(8, 5, interleaved="yes")


# --- backward ------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [False, True])
def test_backward_matches_finite_differences(interleaved):
    rope = RoPE(8, 6, T=np.float64, interleaved=interleaved)
    rng = np.random.default_rng(27)
    x = rng.standard_normal((8, 6, 2))
    dy = rng.standard_normal(x.shape)
    dx = rope.backward(dy)
    eps = 1e-6
    numeric = np.empty_like(x)
    for index in np.ndindex(*x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        numeric[index] = (np.sum(dy * rope(x + step)) - np.sum(dy * rope(x - step))) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("T", [np.float32, np.float64])
@pytest.mark.parametrize("interleaved", [False, True])
def test_backward_undoes_forward(T, interleaved):
    rope = RoPE(16, 50, T=T, interleaved=interleaved)
    x = np.random.default_rng(28).standard_normal((16, 50, 3)).astype(T)
    back = rope.backward(rope(x))
    assert ulp_distance(back, x).max() <= 2 or np.abs(back - x).max() <= 4 * np.finfo(T).eps


def test_backward_is_the_transposed_rotation_exactly():
    cos = np.random.default_rng(29).standard_normal((6, 4)).astype(np.float32)
    sin = np.random.default_rng(30).standard_normal((6, 4)).astype(np.float32)
    rope = RoPE.from_tables(6, cos, sin)
    dy = sample((6, 4, 2), np.float32, seed=31)
    dx = np.empty_like(dy)
    for h1, h2 in reference.half_pairs(6):
        c1, s1, c2, s2 = cos[h1, :, None], sin[h1, :, None], cos[h2, :, None], sin[h2, :, None]
        with np.errstate(all="ignore"):
            dx[h1] = dy[h1] * c1 + dy[h2] * s2
            dx[h2] = dy[h2] * c2 - dy[h1] * s1
    assert_bitwise_equal(rope.backward(dy), dx)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.uint16, np.uint64])
@pytest.mark.parametrize("interleaved", [False, True])
def test_backward_of_integer_gradients_is_that_of_their_float_values(dtype, interleaved):
    """The formula's products convert integers to the table type: no
    negation in the integer type, which wraps (uint8 1 to 255, int8 -128
    to itself), not even at the type's ends."""
    rope = RoPE(8, 6, interleaved=interleaved)
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    ends = [0, 1] if info is None else [info.min, info.min + 1, 0, 1, info.max]
    dy = np.resize(np.array(ends, dtype), 8 * 6 * 2).reshape(8, 6, 2)
    before = dy.copy()
    expected = rope.backward(dy.astype(np.float32))
    for _, view in layouts(dy):
        assert_bitwise_equal(rope.backward(view), expected)
    assert_bitwise_equal(dy, before)


def test_backward_of_integers_beyond_float16_warns_of_nothing():
    """Integers too large for a float16 table become infinities there, as
    in the forward pass, which warns of nothing either (a program that
    turns warnings into errors gets its result)."""
    rope = RoPE(4, 8, T=np.float16)
    dy = np.resize(np.array([100_000, -70_000, 3], np.int32), 4 * 2 * 3).reshape(4, 2, 3)
    with np.errstate(over="ignore"):
        expected = rope.backward(dy.astype(np.float16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_bitwise_equal(rope.backward(dy), expected)
        rope(dy)


def test_backward_with_offset_and_out():
    rope = RoPE(8, 10)
    dy = sample((8, 3, 2), np.float32, seed=32)
    full = np.zeros((8, 10, 2), np.float32)
    full[:, 4:7] = dy
    out = np.empty_like(dy)
    assert rope.backward(dy, out=out, offset=4) is out
    assert_bitwise_equal(out, rope.backward(full)[:, 4:7])
    with pytest.raises(ValueError, match="exceeds maximum length: dy has seq_len 3 from offset 8"):
        rope.backward(dy, offset=8)  # named as the backward pass's other errors name it


# --- AbsolutePE: offset and batch-first ----------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
def test_absolute_offset_equals_slicing(order):
    pe = AbsolutePE(8, 30)
    long = np.asarray(sample((30, 8, 2), np.float32, seed=33), order=order)
    full = pe(long)
    part = np.asarray(long[12:17], order=order)
    assert_bitwise_equal(pe(part, offset=12), full[12:17])
    with pytest.raises(ValueError, match="exceeds maximum length"):
        pe(part, offset=26)


@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_absolute_batch_first(dtype):
    pe = AbsolutePE(6, 10)
    x = sample((3, 7, 6), dtype, seed=34)  # (batch, seq, features)
    expected = pe(np.ascontiguousarray(x.transpose(1, 2, 0))).transpose(2, 0, 1)
    for _, view in layouts(x):
        y = pe(view, batch_first=True)
        assert_bitwise_equal(y, expected)
    julia_layout = np.ascontiguousarray(x.transpose(1, 2, 0))
    assert_bitwise_equal(
        pe(x, batch_first=True, offset=3), pe(julia_layout, offset=3).transpose(2, 0, 1)
    )
    with pytest.raises(ValueError, match="batch_first"):
        pe(np.zeros((3, 7, 6, 1)), batch_first=True)
    with pytest.raises(ValueError, match="Channel dimension"):
        pe(np.zeros((3, 7, 5)), batch_first=True)


# --- AbsolutePE and LearnedPE: position ids -------------------------------------------

ADDITIVE = {
    "absolute": lambda: AbsolutePE(6, 12),
    "learned": lambda: LearnedPE(12, 6, seed=4),
    "learned64": lambda: LearnedPE(12, 6, seed=4, dtype=np.float64),
}
"""The additive layers, each with 12 positions of 6 features."""


def _table(pe) -> np.ndarray:
    """The (features, positions) table that ``pe`` adds."""
    return pe.embeddings if isinstance(pe, AbsolutePE) else pe.embeddings.T


def _assert_ids_read(pe, x: np.ndarray, positions: np.ndarray) -> None:
    """``pe`` at ``positions`` gives the oracle's bits for ``x`` in every
    layout and every way of writing, in ``x``'s memory order, and leaves
    ``x`` and the ids as they were."""
    kept = positions.copy()
    expected = reference.absolute_apply_ids(x, _table(pe), positions)
    for _, view in layouts(x):
        before = view.copy()
        assert_every_way_of_writing(partial(pe, positions=positions), view, expected)
        assert_bitwise_equal(view, before)
    assert_bitwise_equal(positions, kept)
    assert pe(np.asfortranarray(x), positions=positions).flags.f_contiguous


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_additive_position_ids_per_position(layer, dtype):
    """Ids of shape (seq,), repeated and unordered (read by the loops of
    offsets, from a table of the ids' columns)."""
    x = sample((5, 6, 2, 3), dtype, seed=40)
    _assert_ids_read(ADDITIVE[layer](), x, np.array([11, 0, 3, 3, 7]))


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.bool_])
def test_additive_position_ids_per_column(layer, dtype):
    """Ids one per position and batch column (``x``'s shape without its
    features axis), of 4-D and of 3-D inputs."""
    pe = ADDITIVE[layer]()
    rng = np.random.default_rng(2)
    _assert_ids_read(pe, sample((5, 6, 2, 3), dtype, seed=40), rng.integers(0, 12, (5, 2, 3)))
    _assert_ids_read(pe, sample((4, 6, 3), dtype, seed=41), rng.integers(0, 12, (4, 3)))
    same_in_every_column = np.repeat(np.array([11, 0, 3, 3])[:, None], 3, 1)
    _assert_ids_read(pe, sample((4, 6, 3), dtype, seed=42), same_in_every_column)


@pytest.mark.parametrize(
    "layer",
    [lambda: AbsolutePE(40, 12), lambda: LearnedPE(12, 41, seed=4, dtype=np.float64)],
    ids=["absolute", "learned64"],
)
def test_additive_position_ids_per_column_of_a_wide_batch(layer):
    """Per-column ids of a batch wide enough that, with the batch innermost,
    the loop gathers the table's values a block of channels at a time
    (several blocks, the last one shorter) give the oracle's bits in every
    layout."""
    pe = layer()
    features, batch = _table(pe).shape[0], 300
    block = _kernels._GATHERED_BYTES // (batch * _table(pe).itemsize)
    assert 1 < block < features and features % block
    ids = np.random.default_rng(3).integers(0, 12, (3, batch))
    _assert_ids_read(pe, sample((3, features, batch), np.float32, seed=44), ids)


@pytest.mark.parametrize(
    "layer",
    [lambda: AbsolutePE(1024, 32), lambda: LearnedPE(32, 512, seed=4, dtype=np.float64)],
    ids=["absolute", "learned64"],
)
def test_additive_position_ids_of_steps_whose_table_rows_crowd_a_cache_set_or_not(layer):
    """With the batch innermost and more columns than ``_CROWDED``, a step
    whose columns read more table rows than that starting in one set of the
    first-level cache (rows of 4 KiB all do) goes through the buffer; a step
    whose columns read a row or two, element by element: in turn, in one
    call, with the oracle's bits in every layout."""
    pe = layer()
    batch = _kernels._CROWDED + 4
    ids = np.array(
        [np.arange(batch), np.full(batch, 5), np.arange(batch) % 2 + 30, np.arange(batch)[::-1]]
    )
    rows = pe._position_major(32) if isinstance(pe, AbsolutePE) else _table(pe)
    assert rows.strides[1] == 4096
    seen, counts = (
        np.empty((_kernels._SETS, _kernels._CROWDED), np.intp),
        np.empty(_kernels._SETS, np.intp),
    )
    crowded = [_kernels._crowded(ids, a, 4096, seen, counts) for a in range(len(ids))]
    assert crowded == [True, False, False, True]
    x = sample((len(ids), _table(pe).shape[0], batch), np.float32, seed=50)
    _assert_ids_read(pe, x, ids)


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("batch", [2, 3, 4, 7, 8])
def test_additive_position_ids_of_short_batch_rows_read_along_the_channels(
    monkeypatch, layer, dtype, batch
):
    """In C order, ids per column of a batch whose rows hold fewer than 32
    bytes in the wider of ``x``'s and the result's types (float32 results:
    up to 7 columns; float64: up to 3), too short to vectorise, are read
    column by column along the channels; longer rows along the batch.  The
    oracle's bits either way, in every layout; the loops remembered (for
    a decoding step, for a chunk) read them as the checked ones."""
    pe = ADDITIVE[layer]()
    x = sample((5, 6, batch), dtype, seed=batch)
    ids = np.random.default_rng(batch).integers(0, 12, size=(5, batch))
    result = np.result_type(dtype, _table(pe).dtype)
    short = batch * max(x.itemsize, result.itemsize) < 32
    calls = []
    run_ranges = _kernels.run_ranges

    def spy(kernel, length, cost, *args):
        calls.append((kernel.__name__, args[3]))
        run_ranges(kernel, length, cost, *args)

    def found(*args, **kwargs):
        entry, loop_args, *rest = _kernels.absolute_ids_direct(*args, **kwargs)
        calls.append(("remembered", loop_args[-1]))
        return entry, loop_args, *rest

    monkeypatch.setattr(_kernels, "run_ranges", spy)
    monkeypatch.setattr(absolute, "absolute_ids_direct", found)
    assert_bitwise_equal(pe(x, positions=ids), reference.absolute_apply_ids(x, _table(pe), ids))
    step = x[:1]
    pe(step, positions=ids[:1])
    assert set(calls) == {("_absolute_ids", short), ("remembered", short)}
    _assert_ids_read(pe, x, ids)
    _assert_ids_read(pe, step, ids[:1])


@pytest.mark.parametrize("layer", ADDITIVE)
def test_additive_position_ids_per_column_over_two_threads(layer, monkeypatch):
    """Per-column ids (left-padded rows, as PyTorch's ``position_ids``) read
    over two threads, each taking a range of the outer of the sequence and
    batch axes in memory, give the oracle's bits in every layout."""
    split_over(monkeypatch, 2)
    lengths = np.array([9, 5, 1, 7])
    ids = np.maximum(np.arange(9)[:, None] - (9 - lengths)[None], 0)
    _assert_ids_read(ADDITIVE[layer](), sample((9, 6, 4), np.float32, seed=43), ids)


@pytest.mark.parametrize("layer", ADDITIVE)
def test_additive_position_ids_batch_first_as_pytorch_numbers_them(layer):
    """Batch-first input takes ids of shape (seq,) or (batch, seq), as
    Hugging Face's ``position_ids`` (left-padded sequences numbered from
    their first token), with the bits of the same ids in Julia's layout."""
    pe = ADDITIVE[layer]()
    x = sample((3, 7, 6), np.float32, seed=41)  # (batch, seq, features)
    julia_layout = np.ascontiguousarray(x.transpose(1, 2, 0))
    lengths = np.array([7, 4, 2])
    position_ids = np.maximum(np.arange(7)[None] - (7 - lengths)[:, None], 0)
    for positions, columns in ((position_ids, position_ids.T), (np.arange(4, 11),) * 2):
        expected = pe(julia_layout, positions=columns).transpose(2, 0, 1)
        assert_bitwise_equal(
            expected.transpose(1, 2, 0),
            reference.absolute_apply_ids(julia_layout, _table(pe), columns),
        )
        for _, view in layouts(x):
            assert_every_way_of_writing(
                partial(pe, positions=positions, batch_first=True), view, expected
            )
    with pytest.raises(
        ValueError, match=r"positions must have shape \(7,\) or \(3, 7\), got \(7, 3\)"
    ):
        pe(x, positions=position_ids.T, batch_first=True)


@pytest.mark.parametrize("layer", ADDITIVE)
def test_additive_position_ids_equal_to_an_offset(layer):
    """Ids ``offset .. offset + seq - 1`` give the bits of that offset, per
    position and per batch column; the default offset of any integer type
    goes with ids, another offset does not."""
    pe = ADDITIVE[layer]()
    x = sample((4, 6, 3), np.float32, seed=42)
    expected = pe(x, offset=5)
    assert_bitwise_equal(pe(x, positions=np.arange(5, 9)), expected)
    assert_bitwise_equal(pe(x, positions=np.repeat(np.arange(5, 9)[:, None], 3, 1)), expected)
    assert_bitwise_equal(pe(x, positions=[5, 6, 7, 8], offset=np.uint8(0)), expected)
    with pytest.raises(ValueError, match="pass either offset or positions, not both"):
        pe(x, positions=np.arange(4), offset=1)


@pytest.mark.parametrize("layer", ADDITIVE)
def test_additive_position_ids_are_checked(layer):
    pe = ADDITIVE[layer]()
    x = np.zeros((4, 6, 3), np.float32)
    for bad in (-1, 12):
        with pytest.raises(ValueError, match=r"positions must lie in \[0, 12\)"):
            pe(x, positions=np.full(4, bad))
    with pytest.raises(
        ValueError, match=r"positions must have shape \(4,\) or \(4, 3\), got \(4, 6\)"
    ):
        pe(x, positions=np.zeros((4, 6), int))
    with pytest.raises(TypeError, match="positions must be integers"):
        pe(x, positions=np.zeros(4))
    assert pe(np.zeros((0, 6, 3)), positions=[]).shape == (0, 6, 3)


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("seq", [1, 2, 5])
@pytest.mark.parametrize("batch", [4, 17])
def test_additive_decoding_steps_with_position_ids_take_the_direct_path(
    monkeypatch, layer, order, batch_first, seq, batch
):
    """Decoding a left-padded batch (GPT-2's ``position_ids``, one per
    sequence and step): after one checked call of each kind, steps with ids
    of the same shape and layout skip the checks' slow path, read each
    step's own ids (ids the same in every column too, of any integer dtype,
    a list of Python ints too), and still refuse ids out of range.  Two
    positions in Julia's order run the loop over the batch outermost; a
    batch innermost of more than ``_CROWDED`` columns, the loop that
    gathers the table's values first where they crowd a cache set.  Five
    positions: a chunk of a few tokens at a time."""
    pe = ADDITIVE[layer]()
    shape = (batch, seq, 6) if batch_first else (seq, 6, batch)  # a few tokens per sequence
    x = np.asarray(sample(shape, np.float32, seed=45), order=order)
    julia_x = x.transpose(1, 2, 0) if batch_first else x
    call = partial(pe, batch_first=batch_first)
    rng = np.random.default_rng(45)
    for step in range(6):
        ids = rng.integers(0, 12, size=(batch, seq) if batch_first else (seq, batch))
        if step == 3:
            ids[...] = 7  # the same in every column, as a batch without padding
        columns = ids.T if batch_first else ids
        expected = reference.absolute_apply_ids(julia_x, _table(pe), columns)
        if batch_first:
            expected = expected.transpose(2, 0, 1)
        if step == 0:  # checked, and remembered for each kind of call
            assert_every_way_of_writing(partial(call, positions=ids), x, expected)
            continue
        with monkeypatch.context() as patch:
            patch.setattr(absolute, "add_embeddings", refuse_checked_path)
            patch.setattr(learned_module, "add_embeddings", refuse_checked_path)
            assert_every_way_of_writing(partial(call, positions=ids), x, expected)
            for dtype in (np.int32, np.uint8):
                assert_bitwise_equal(call(x, positions=ids.astype(dtype)), expected)
            assert_bitwise_equal(call(x, positions=ids.tolist()), expected)
    for bad in (-1, 12):
        with pytest.raises(ValueError, match=r"positions must lie in \[0, 12\)"):
            call(x, positions=np.full(ids.shape, bad))


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("seq", [1, 2, 5])
def test_additive_calls_with_ids_of_a_run_take_the_remembered_offset_call(
    monkeypatch, layer, order, batch_first, seq
):
    """Ids ``k, k + 1, ..`` (of shape (seq,), or the same run in every batch
    column: PyTorch's ``position_ids`` without padding) read what the offset
    ``k`` reads, and after one checked call of each kind take the call
    remembered for offsets: ``pe(x, positions=[p])`` decoding a step, or a
    few positions at a time.  The ids are still checked there: a run out of
    range, of another length than the sequence, with an offset, or of floats
    is refused as the checks refuse it."""
    pe = ADDITIVE[layer]()
    shape = (3, seq, 6) if batch_first else (seq, 6, 3)
    x = np.asarray(sample(shape, np.float32, seed=48), order=order)
    call = partial(pe, batch_first=batch_first)
    per_column = (3, seq) if batch_first else (seq, 3)
    run_axis = 1 if batch_first else 0

    def runs(start: int) -> list:
        run = np.arange(start, start + seq)
        column = np.broadcast_to(np.expand_dims(run, 1 - run_axis), per_column)
        return [run, run.tolist(), run.astype(np.int32), column.copy(), column.T.copy().T]

    last = 12 - seq  # checked, and remembered for each way of writing: up to the last position
    for ids in runs(last):
        assert_every_way_of_writing(partial(call, positions=ids), x, call(x, offset=last))
    with monkeypatch.context() as patch:
        patch.setattr(absolute, "add_embeddings", refuse_checked_path)
        patch.setattr(learned_module, "add_embeddings", refuse_checked_path)
        for start in (0, 3, last):
            julia_x = np.moveaxis(x, 0, 2) if batch_first else x
            expected = reference.absolute_apply(julia_x, _table(pe)[:, start:])
            if batch_first:
                expected = np.moveaxis(expected, 2, 0)
            for ids in runs(start):
                assert_every_way_of_writing(partial(call, positions=ids), x, expected)
    for bad, error, message in (
        (np.arange(13 - seq, 13), ValueError, r"positions must lie in \[0, 12\)"),
        (np.arange(-1, seq - 1), ValueError, r"positions must lie in \[0, 12\)"),
        (np.arange(2, 3 + seq), ValueError, "positions must have shape"),
        (np.array(2), ValueError, "positions must have shape"),
        (np.arange(2.0, 2.0 + seq), TypeError, "positions must be integers"),
    ):
        with pytest.raises(error, match=message):
            call(x, positions=bad)
    with pytest.raises(ValueError, match="pass either offset or positions, not both"):
        call(x, positions=np.arange(2, 2 + seq), offset=2)


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("seq", [1, 5])
def test_remembered_batch_first_calls_refuse_masked_ids(layer, seq):
    """Masked ids are refused by a layer that remembers calls of their
    layout, as by one that does not: read as an array, their mask would be
    dropped and the masked ids read."""
    pe = ADDITIVE[layer]()
    x = sample((3, seq, 6), np.float32, seed=49)
    ids = np.arange(3 * seq).reshape(3, seq) % 12
    for _ in range(2):
        pe(x, positions=ids, batch_first=True)
    masked = np.ma.masked_array(ids, mask=ids == ids.max())
    with pytest.raises(TypeError, match="positions must not be a masked array"):
        pe(x, positions=masked, batch_first=True)


@pytest.mark.parametrize("layer", ADDITIVE)
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("remembered", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_additive_position_ids_stored_where_the_call_writes_are_read_first(
    layer, in_place, remembered, batch_first
):
    """Ids per column that lie in ``out``'s memory (in ``x``'s, in place)
    are read as they were before the call, as RoPE reads them: the loop
    wrote over them while it read them, then indexed the table with what it
    had written (a crash).  The same from a layer that remembers calls of
    these layouts (a decoding step's), batch-first ones too, whose
    remembered call reads a transposed view of the ids."""
    pe = ADDITIVE[layer]()
    shape, ids_shape = ((8, 1, 6), (8, 1)) if batch_first else ((1, 6, 8), (1, 8))
    memory = np.zeros(48)
    written = memory.reshape(shape, order="F")
    ids = memory.view(np.intp)[30:38].reshape(ids_shape)
    x = written if in_place else np.empty(shape, order="F")
    x[...] = sample(shape, np.float64, seed=46)
    ids[...] = np.arange(8).reshape(ids_shape) + 3
    julia = (lambda a: a.transpose(1, 2, 0)) if batch_first else (lambda a: a)
    expected = reference.absolute_apply_ids(
        julia(x).copy(), _table(pe), (ids.T if batch_first else ids).copy()
    )
    call = partial(pe, batch_first=batch_first)
    if remembered:  # arrays of the same layouts, apart
        for _ in range(2):
            other = np.empty(shape, order="F")
            call(other, out=other if in_place else np.empty(shape, order="F"), positions=0 * ids)
    assert call(x, out=written, positions=ids) is written
    assert_bitwise_equal(julia(written), expected)


def test_absolute_decoding_steps_read_ids_beyond_the_table_copy_kept():
    """A remembered step reads the position-major copy of the table that
    the checked step grew to its ids; a later step with ids beyond that
    copy is checked again (the copy grown), with the oracle's bits."""
    pe = AbsolutePE(6, 4096)
    x = sample((1, 6, 4), np.float32, seed=47)  # C order: the copy is read
    for ids in ([[0, 1, 2, 3]], [[3, 2, 1, 0]], [[5, 4000, 7, 4095]], [[4095, 0, 1, 2]]):
        expected = reference.absolute_apply_ids(x, pe.embeddings, np.array(ids))
        assert_bitwise_equal(pe(x, positions=ids), expected)


@pytest.mark.parametrize("in_place", [True, False])
def test_learned_position_ids_into_the_table_they_read(in_place):
    """An ``out`` that is part of the table gets the sums of the table as it
    was before the call, with ids too."""
    table = np.arange(60, dtype=np.float32).reshape(10, 6)
    pe = LearnedPE.from_table(table)
    ids = np.array([[5, 0], [9, 4], [6, 7]])  # rows 4-9 are written
    out = table[4:10].reshape(3, 2, 6).transpose(0, 2, 1)  # (seq, features, batch)
    x = out if in_place else np.ones((3, 6, 2), np.float32)
    expected = reference.absolute_apply_ids(x, table.T.copy(), ids)
    assert pe(x, out=out, positions=ids) is out
    assert_bitwise_equal(out, expected)
    assert_bitwise_equal(table[:4], np.arange(24, dtype=np.float32).reshape(4, 6))


def test_learned_backward_with_position_ids():
    """The table's gradient at ids adds every term of the positions and batch
    columns that read a row (exactly, for values whose sums are exact), zero
    elsewhere; ``dx`` is ``dy``."""
    pe = LearnedPE(12, 6, dtype=np.float64, seed=6)
    dy = np.random.default_rng(7).integers(-50, 50, size=(5, 6, 2, 3)).astype(np.float64)
    ids = np.array([11, 0, 3, 3, 7])
    per_column = np.random.default_rng(8).integers(0, 12, size=(5, 2, 3))
    for positions in (ids, per_column):
        expected = reference.learned_gradient_ids(dy, 12, positions)
        for _, view in layouts(dy):
            dx, dtable = pe.backward(view, positions=positions)
            assert_bitwise_equal(dx, dy)
            assert_bitwise_equal(dtable, expected)
    batch_first = np.ascontiguousarray(dy[..., 0].transpose(2, 0, 1))  # (2, 5, 6)
    _, dtable = pe.backward(batch_first, positions=per_column[..., 0].T, batch_first=True)
    assert_bitwise_equal(dtable, reference.learned_gradient_ids(dy[..., 0], 12, per_column[..., 0]))
    with pytest.raises(ValueError, match="pass either offset or positions, not both"):
        pe.backward(dy, positions=ids, offset=1)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 12\)"):
        pe.backward(dy, positions=ids + 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("table_dtype", [np.float32, np.float64])
def test_learned_backward_position_ids_same_bits_as_the_offset_and_in_every_layout(
    dtype, table_dtype
):
    """Ids ``offset ..`` give the offset's gradient bit for bit, signed zeros
    included (rows read are summed from -0.0, those not read are +0.0);
    ids per batch column give the same bits whatever ``dy``'s memory order."""
    pe = LearnedPE(10, 4, dtype=table_dtype, seed=5)
    dy = (100 * np.random.default_rng(44).standard_normal((5, 4, 60))).astype(dtype)
    assert_bitwise_equal(
        pe.backward(dy, positions=np.arange(2, 7))[1], pe.backward(dy, offset=2)[1]
    )
    zeros = -np.zeros((5, 4, 3), dtype)
    assert_bitwise_equal(
        pe.backward(zeros, positions=np.arange(2, 7))[1], pe.backward(zeros, offset=2)[1]
    )
    per_column = np.random.default_rng(9).integers(0, 10, size=(5, 60))
    expected = pe.backward(np.ascontiguousarray(dy), positions=per_column)[1]
    for _, view in [*layouts(dy), ("seq last", stored(dy, (1, 2, 0)))]:
        assert_bitwise_equal(pe.backward(view, positions=per_column)[1], expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_absolute_channel_innermost_across_position_blocks(monkeypatch, threads):
    """Channel-innermost loops (batch-first inputs, 64 positions at a time;
    C order with batch rows shorter than a vector, one position at a time;
    split over threads): partial last blocks, offsets and every split give
    the oracle's bits, next to the batch-innermost loop of longer batches
    (one position at a time; a single position split into blocks of
    channels)."""
    split_over(monkeypatch, threads)
    pe = AbsolutePE(10, 200)
    for seq, offset in ((137, 0), (64, 5), (1, 199), (70, 130)):
        table = pe.embeddings[:, offset : offset + seq]
        x = sample((3, seq, 10), np.float32, seed=seq)  # (batch, seq, features)
        expected = reference.absolute_apply(x.transpose(1, 2, 0), table).transpose(2, 0, 1)
        assert_bitwise_equal(pe(x, batch_first=True, offset=offset), expected)
        for batch, dtype in (
            (2, np.float32),
            (3, np.float64),
            (3, np.int16),
            (4, np.int16),
            (9, np.float32),
            (33, np.float64),
        ):
            x = sample((seq, 10, batch), dtype, seed=batch)  # C order: batch innermost
            before = x.copy()
            expected = reference.absolute_apply(x, table)
            assert_bitwise_equal(pe(x, offset=offset), expected)
            assert_bitwise_equal(x, before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("plane_elements", [None, 1000])
def test_absolute_julia_order_in_planes(monkeypatch, threads, plane_elements):
    """Julia's order with short sequences adds the table, laid out as one
    (seq, channel) plane, to each batch column's plane in one loop (a group
    of channels at a time when the plane is large; with fewer groups than
    threads, blocks of batch columns split over threads): offsets, float16,
    integers and columns that are runs but not adjacent give the oracle's
    bits; planes that are not one run (a
    strided channel axis), longer sequences and batches of one or two
    columns take the row loop, with the same bits."""
    if plane_elements is not None:  # groups of 10 channels at seq 100, 3 at seq 256
        monkeypatch.setattr(_kernels, "_PLANE_ELEMENTS", plane_elements)
    runs = runs_recorded(monkeypatch, threads)
    pe = AbsolutePE(80, 400)
    planes, rows = _kernels._absolute_planes, _kernels._absolute_inner_seq
    for seq, offset, loop in ((256, 0, planes), (100, 37, planes), (257, 143, rows)):
        table = pe.embeddings[:, offset : offset + seq]
        for dtype in (np.float32, np.float16, np.int32):
            x = np.asfortranarray(sample((seq, 80, 3), dtype, seed=seq))
            apart = np.asfortranarray(sample((seq, 80, 6), dtype, seed=seq))[:, :, ::2]
            for y in (x, apart):
                before = y.copy()
                runs.clear()
                assert_bitwise_equal(pe(y, offset=offset), reference.absolute_apply(y, table))
                assert_bitwise_equal(y, before)
                assert [run.kernel for run in runs] == [loop]
        wide = np.asfortranarray(sample((seq, 160, 3), np.float64, seed=7))[:, ::2]
        two = np.asfortranarray(sample((seq, 80, 2), np.float64, seed=8))
        for y in (wide, two):
            runs.clear()
            assert_bitwise_equal(pe(y, offset=offset), reference.absolute_apply(y, table))
            assert [run.kernel for run in runs] == [rows]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_sequence_innermost(monkeypatch, threads, interleaved):
    """Inputs whose seq axis is innermost (C order with one batch column, or
    a (head, batch, seq) array seen as (head, seq, batch)) loop along the
    sequence, pair by pair (split over threads), reading C-order copies of
    the tables that grow with the positions used: offsets, position ids,
    odd interleaved heads, float16 and integers, the backward pass and in
    place give the oracle's bits, and the input is left alone."""
    split_over(monkeypatch, threads)
    head = 7 if interleaved else 8
    rope = RoPE(head, 300, interleaved=interleaved)
    pairs = (reference.interleaved_pairs if interleaved else reference.half_pairs)(head)
    ids = np.random.default_rng(5).integers(0, 300, 150)
    for dtype in (np.float32, np.float16, np.int32):
        one_column = sample((head, 150, 1), dtype, seed=150)  # C order: seq innermost
        seq_last = sample((head, 3, 150), dtype, seed=3).transpose(0, 2, 1)
        for x in (one_column, seq_last):
            assert _kernels._rope_loop(x, None, 0, 2 * x.nbytes)[0] is _kernels._rope_inner_seq
            before = x.copy()
            for offset, positions in ((0, None), (3, None), (137, None), (0, ids)):
                where = positions if positions is not None else np.arange(150) + offset
                expected = reference.rope_apply_pairs(
                    x, rope.cos_cached, rope.sin_cached, pairs, where[:, np.newaxis]
                )
                assert_bitwise_equal(rope(x, offset=offset, positions=positions), expected)
            assert_bitwise_equal(x, before)
    x = sample((head, 150, 1), np.float64, seed=1)
    expected = rope.backward(np.asfortranarray(x), offset=100)  # the loop along the head
    assert_bitwise_equal(rope.backward(x, offset=100), expected)
    assert rope.backward(x, out=x, offset=100) is x
    assert_bitwise_equal(x, expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_few_positions_loop_over_positions_outermost(monkeypatch, threads, interleaved):
    """Calls with one or two positions (decoding) that run on one thread
    loop over positions outermost, in both memory orders; three positions,
    or a call split over threads, keep the usual loops.  Every loop gives
    the oracle's bits for offsets, position ids per position and per column,
    odd interleaved heads, float16 and integers, in place too, and leaves
    the input alone."""
    split_over(monkeypatch, threads)
    few = {"C": _kernels._rope_positions_outer_batch, "F": _kernels._rope_positions_outer_head}
    head = 7 if interleaved else 8
    rope = RoPE(head, 50, interleaved=interleaved)
    pairs = (reference.interleaved_pairs if interleaved else reference.half_pairs)(head)
    for seq in (1, 2, 3):
        ids = np.random.default_rng(seq).integers(0, 50, seq)
        per_column = np.random.default_rng(seq).integers(0, 50, (seq, 5))
        for dtype in (np.float32, np.float16, np.int32):
            for order in ("C", "F"):
                x = np.asarray(sample((head, seq, 5), dtype, seed=seq), order=order)
                before = x.copy()
                loop = _kernels._rope_loop(x, None, 0, 2 * x.nbytes)[0]
                assert (loop is few[order]) == (seq <= 2 and threads == 1)
                for offset, positions in ((0, None), (47, None), (0, ids), (0, per_column)):
                    where = np.arange(seq) + offset if positions is None else positions
                    expected = reference.rope_apply_pairs(
                        x, rope.cos_cached, rope.sin_cached, pairs, where.reshape(seq, -1)
                    )
                    assert_bitwise_equal(rope(x, offset=offset, positions=positions), expected)
                    assert_bitwise_equal(x, before)
                    if dtype == np.float32:
                        in_place = x.copy(order="K")
                        rope(in_place, out=in_place, offset=offset, positions=positions)
                        assert_bitwise_equal(in_place, expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_arrays_stored_position_by_position(monkeypatch, threads, interleaved):
    """Arrays whose seq axis has the largest stride loop over positions
    outermost; (head, seq, heads) views of (seq, heads, head) arrays (Hugging
    Face's (batch, seq, heads, head_dim) with its axes reversed) run as
    (head, heads, seq) views, which are F-contiguous.
    Offsets, ids per position and per column, odd interleaved heads, float16
    and integers, in place too: the oracle's bits, the input left alone."""
    runs = runs_recorded(monkeypatch, threads)
    head, seq, batch = (7 if interleaved else 8), 6, 5
    pairs = (reference.interleaved_pairs if interleaved else reference.half_pairs)(head)
    rng = np.random.default_rng(6)
    ids, per_column = rng.integers(0, 50, seq), rng.integers(0, 50, (seq, batch))
    stored_loops = (
        ((1, 2, 0), _kernels._rope_inner_head),  # (seq, heads, head)
        ((1, 0, 2), _kernels._rope_positions_outer_batch),  # (seq, head, heads)
    )
    for dtype in (np.float32, np.float16, np.int32):
        for axes, loop in stored_loops:
            x = stored(sample((head, seq, batch), dtype, seed=len(runs)), axes)
            before = x.copy()
            for offset, positions in ((0, None), (44, None), (0, ids), (0, per_column)):
                rope = RoPE(head, 50, interleaved=interleaved)  # nothing remembered
                where = np.arange(seq) + offset if positions is None else positions
                expected = reference.rope_apply_pairs(
                    x, rope.cos_cached, rope.sin_cached, pairs, where.reshape(seq, -1)
                )
                runs.clear()
                y = rope(x, offset=offset, positions=positions)
                assert [run.kernel for run in runs] == [loop]
                assert_bitwise_equal(y, expected)
                if y.dtype == x.dtype:
                    assert y.strides == x.strides  # in x's memory order
                assert_bitwise_equal(x, before)
                if dtype == np.float32:
                    in_place = x.copy(order="K")
                    assert rope(in_place, out=in_place, offset=offset, positions=positions) is (
                        in_place
                    )
                    assert_bitwise_equal(in_place, expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_absolute_arrays_stored_position_by_position(monkeypatch, threads):
    """(seq, features, batch) views of (seq, batch, features) arrays
    (PyTorch's layout for sequence models) add each position's table column
    to its batch columns, on (seq, batch, features) views: offsets, float16,
    integers, in place and every split give the oracle's bits."""
    runs = runs_recorded(monkeypatch, threads)
    for seq, offset in ((3, 0), (37, 163)):
        for dtype in (np.float32, np.float16, np.int16, np.float64):
            pe = AbsolutePE(10, 200)
            x = stored(sample((seq, 10, 4), dtype, seed=seq), (0, 2, 1))
            before = x.copy()
            expected = reference.absolute_apply(x, pe.embeddings[:, offset : offset + seq])
            runs.clear()
            assert_bitwise_equal(pe(x, offset=offset), expected)
            assert [run.kernel for run in runs] == [_kernels._absolute_seq_major]
            assert_bitwise_equal(x, before)
            if dtype in (np.float32, np.float64):
                assert pe(x, out=x, offset=offset) is x
                assert_bitwise_equal(x, expected)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_on_parts_of_larger_arrays(interleaved):
    """Julia's order cut from longer arrays (a fused projection's part, a
    cache's first positions, every other channel, channels reversed), into
    a new output or a part of another array: the oracle's bits, and nothing
    written outside the part."""
    head = 7 if interleaved else 8
    rope = RoPE(head, 40, interleaved=interleaved)
    pairs = (reference.interleaved_pairs if interleaved else reference.half_pairs)(head)
    for dtype in (np.float32, np.float64, np.float16, np.int32):
        fused = np.asfortranarray(sample((3 * head, 30, 6), dtype, seed=head))
        cache = np.asfortranarray(sample((head, 40, 6), dtype, seed=1))
        for x in (fused[head : 2 * head], cache[:, :30], fused[::3], cache[::-1, 5:35]):
            expected = reference.rope_apply_pairs(
                x, rope.cos_cached, rope.sin_cached, pairs, np.arange(30)[:, np.newaxis]
            )
            before = x.copy()
            assert_bitwise_equal(rope(x), expected)
            target = np.full((2 * head, 30, 6), 7, expected.dtype, order="F")
            part = target[head:]
            assert rope(x, out=part) is part
            assert_bitwise_equal(part, expected)
            assert (target[:head] == 7).all()
            assert_bitwise_equal(x, before)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("interleaved", [False, True])
def test_repeated_backward_calls_take_the_direct_path(monkeypatch, order, interleaved):
    """A training loop's backward calls of one layout skip the checks after
    the first, as the forward pass's do, with the bits of the checked call
    (allocating, into ``out``, in place; at offsets of any integer type and
    with position ids); the forward pass keeps loops of its own (other
    tables, the same layouts); integer gradients are still read as their
    float values, and bad calls still refused by the checks."""
    rope = RoPE(16, 40, interleaved=interleaved)
    dy = np.asarray(sample((16, 2, 4), np.float32, seed=33), order=order)
    ids = np.array([30, 5])
    expected = {offset: rope.backward(dy, offset=offset) for offset in (0, 7, 38)}
    by_ids = reference.rope_apply_pairs(  # the transposed rotation: by minus each angle
        dy,
        rope.cos_cached,
        -rope.sin_cached,
        reference.interleaved_pairs(16) if interleaved else reference.half_pairs(16),
        np.broadcast_to(ids[:, None], (2, 4)),
    )
    forward = rope(dy, offset=7)
    for offset, want in expected.items():
        assert_every_way_of_writing(partial(rope.backward, offset=offset), dy, want)
    assert_every_way_of_writing(partial(rope.backward, positions=ids), dy, by_ids)
    with monkeypatch.context() as patch:
        patch.setattr(RoPE, "_apply", refuse_checked_path)
        for offset, want in expected.items():
            for kind in (int, np.int64, np.uint8):
                assert_every_way_of_writing(partial(rope.backward, offset=kind(offset)), dy, want)
        for kind in (np.intp, np.int32):
            step = partial(rope.backward, positions=ids.astype(kind))
            assert_every_way_of_writing(step, dy, by_ids)
        assert_bitwise_equal(rope(dy, offset=7), forward)
    integers = np.arange(dy.size, dtype=np.int16).reshape(dy.shape)
    assert_bitwise_equal(rope.backward(integers), rope.backward(integers.astype(np.float32)))
    with pytest.raises(ValueError, match="exceeds maximum length"):
        rope.backward(dy, offset=39)
    with pytest.raises(ValueError, match="positions must lie"):
        rope.backward(dy, positions=np.array([5, 40]))
    with pytest.raises(TypeError, match="dtype float32"):
        rope.backward(dy, out=np.empty_like(dy, dtype=np.float64))
