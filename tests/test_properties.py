"""Property-based tests (hypothesis) over shapes, dtypes and memory orders.

The "ci" profile (default) runs 200 examples per property; run
``HYPOTHESIS_PROFILE=long pytest tests/test_properties.py`` for 10,000.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from positional_embeddings import (
    AbsolutePE,
    LearnedPE,
    RoPE,
    _kernels,
    create_padding_mask,
    neg_half,
)

import reference
from comparisons import assert_bitwise_equal, assert_every_way_of_writing
from test_rope import stored, stored_part

INPUT_DTYPES = st.sampled_from(
    [np.float16, np.float32, np.float64, np.int64, np.int16, np.uint8, np.bool_]
)
TABLE_DTYPES = st.sampled_from([np.float16, np.float32, np.float64])


@st.composite
def arrays_in_any_layout(draw, first: int, second: int, dtypes=INPUT_DTYPES, rest=None):
    """An array (first, second, rest...) as C, F, a strided, reversed view, a
    slice of a longer array, or a view of a contiguous array that stores its
    axes in another order, whole or a part of it cut along one axis (a
    cache's first positions, a fused projection's queries).  ``rest``, the
    shape of the axes after the second, is drawn unless given."""
    dtype = draw(dtypes)
    if rest is None:
        # Axes of 1-3: hypothesis leans to the smallest value, and axes of 0
        # made most arrays empty (empty ones have a test of their own).
        rest = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    shape = (first, second, *rest)
    x = draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))
    layout = draw(st.sampled_from(["C", "F", "strided", "stored", "stored and cut", "sliced"]))
    if layout == "stored and cut":
        axes = draw(st.permutations(range(x.ndim)))
        return stored_part(x, axes, draw(st.integers(0, x.ndim - 1)), draw(st.integers(1, 3)))
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "sliced":  # a part of a longer array, C or F, its innermost stride 1
        big = np.zeros((shape[0], shape[1] + 2, *shape[2:]), dtype, draw(st.sampled_from("CF")))
        view = big[:, 1:-1]
        view[...] = x
        return view
    if layout == "stored":
        return stored(x, draw(st.permutations(range(x.ndim))))
    if layout == "strided":
        big = np.zeros((*shape[:-1], 2 * shape[-1]), dtype)
        view = big[..., ::-2]
        view[...] = x
        return view
    return x


def _elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return hnp.from_dtype(dtype, allow_nan=True, allow_infinity=True)
    return None


@pytest.mark.parametrize("shape", [(0, 4, 2), (4, 0, 2), (4, 2, 0), (4, 2, 2, 0)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_rope_and_absolute_pe_of_empty_arrays_match_reference(shape, order):
    """Arrays with an axis of length 0 (the property tests draw none): an
    empty result of the promoted dtype and the input's shape."""
    x = np.zeros(shape, np.float32, order)
    rope, pe = RoPE(shape[0], 4), AbsolutePE(shape[1], 4)
    for y, expected in (
        (rope(x), reference.rope_apply(x, rope.cos_cached, rope.sin_cached)),
        (pe(x), reference.absolute_apply(x, pe.embeddings)),
    ):
        assert y.shape == shape and y.dtype == np.float32
        assert y.flags.f_contiguous if order == "F" else y.flags.c_contiguous
        assert_bitwise_equal(y, expected)


@given(data=st.data(), half=st.integers(1, 8), T=TABLE_DTYPES)
def test_rope_matches_reference(data, half, T):
    rope = RoPE(2 * half, 6, T=T)
    x = data.draw(arrays_in_any_layout(2 * half, data.draw(st.integers(1, 6))))
    before = x.copy()
    assert_bitwise_equal(rope(x), reference.rope_apply(x, rope.cos_cached, rope.sin_cached))
    assert_bitwise_equal(x, before)


REWRITABLE = st.sampled_from([np.float16, np.float32, np.float64])
"""The dtypes of inputs that RoPE with tables of the same type can rewrite in place."""


def rewritable_encodings(dtype, half: int, seq: int, channels: int) -> list[tuple]:
    """(encoding, first, second): RoPE with ``dtype`` tables, forward and
    backward, and AbsolutePE (float32 table) unless ``dtype`` is float16,
    whose sum is float32."""
    rope = RoPE(2 * half, 6, T=dtype)
    encodings = [(rope, 2 * half, seq), (rope.backward, 2 * half, seq)]
    if dtype != np.float16:
        encodings.append((AbsolutePE(channels, 6), seq, channels))
    return encodings


@given(data=st.data(), half=st.integers(1, 8), channels=st.sampled_from([1, 2, 4, 6]))
def test_in_place_matches_a_separate_output(data, half, channels):
    """``out=x`` in any layout gives the bits of a new output (x's dtype is
    its own promotion: float16, float32 or float64 with tables of that type;
    AbsolutePE's table is float32)."""
    dtype = data.draw(REWRITABLE)
    for encoding, first, second in rewritable_encodings(
        dtype, half, data.draw(st.integers(1, 6)), channels
    ):
        x = data.draw(arrays_in_any_layout(first, second, st.just(dtype)))
        expected = encoding(x)
        assert encoding(x, out=x) is x
        assert_bitwise_equal(x, expected)


@given(data=st.data(), half=st.integers(1, 8), channels=st.sampled_from([1, 2, 4, 6]))
def test_repeated_calls_give_the_bits_of_the_first(data, half, channels):
    """A second round of calls on arrays of one layout, which takes the
    remembered loop wherever one is kept (3-D and merged N-D layouts alike),
    gives the bits of the first, checked round: allocating, with ``out=`` (a
    new array, and one in any layout, as a slot of a cache) and in place
    (into a compact copy, and into ``x`` itself, whatever its layout), at
    one offset (given later as a Python or a numpy integer)."""
    dtype = data.draw(REWRITABLE)
    seq = data.draw(st.integers(1, 3))
    offset = data.draw(st.integers(0, 6 - seq))
    kind = data.draw(st.sampled_from([int, np.int64, np.int32, np.uint8]))
    for encoding, first, second in rewritable_encodings(dtype, half, seq, channels):
        x = data.draw(arrays_in_any_layout(first, second, st.just(dtype)))
        expected = encoding(x, offset=offset)
        step = partial(encoding, offset=kind(offset))
        out = data.draw(arrays_in_any_layout(first, second, st.just(dtype), x.shape[2:]))
        for _ in range(2):
            assert_every_way_of_writing(step, x, expected)
            assert step(x, out=out) is out
            assert_bitwise_equal(out, expected)
        before = x.copy()
        for _ in range(2):
            assert step(x, out=x) is x
            assert_bitwise_equal(x, expected)
            x[...] = before


def _outcome(call):
    """``call()``'s result, or the type and message of the error it raised."""
    try:
        return call()
    except (TypeError, ValueError) as error:
        return type(error), str(error)


@settings(max_examples=max(settings().max_examples // 4, 1))  # each compiles loops of its own
@given(data=st.data(), half=st.integers(1, 4), channels=st.sampled_from([2, 4, 6]))
def test_interleaved_calls_give_what_a_layer_remembering_none_gives(data, half, channels):
    """One layer's calls on arrays of a few layouts in turn, each at its own
    offset (a Python or a numpy integer) or position ids (an array or a
    list), some beyond the tables, allocating, into ``out`` (in any layout)
    or in place (into ``x``, whatever its layout), give the bits, the
    output's strides and the error of the same call on a new layer, which
    remembers none: a remembered loop (the last one found first) serves no
    call of another layout, output, ids' layout or range, and a call it
    refuses leaves the next one's right.  Float32 and a quarter of the
    profile's examples: the layouts of ``x``, ``out`` and the ids make
    hundreds of loops to compile, a few minutes of every new cache."""
    make, name, size, seq_axis = data.draw(
        st.sampled_from(
            [
                (partial(RoPE, 2 * half, 6), "__call__", 2 * half, 1),
                (partial(RoPE, 2 * half, 6), "backward", 2 * half, 1),
                (partial(AbsolutePE, channels, 6), "__call__", channels, 0),
                (partial(LearnedPE, 6, channels, seed=0), "__call__", channels, 0),
            ]
        )
    )
    encoding = getattr(make(), name)
    pool = []
    for _ in range(3):
        seq = data.draw(st.integers(1, 3))
        first, second = (size, seq) if seq_axis else (seq, size)
        pool.append(data.draw(arrays_in_any_layout(first, second, st.just(np.float32))))
    for _ in range(data.draw(st.integers(4, 10))):
        x = data.draw(st.sampled_from(pool))
        seq = x.shape[seq_axis]
        beyond = data.draw(st.sampled_from([False, False, True]))  # the tables' 6 positions
        if data.draw(st.booleans()):
            offset = 7 - seq if beyond else data.draw(st.integers(0, 6 - seq))
            where = {"offset": data.draw(st.sampled_from([int, np.int64]))(offset)}
        else:
            ids_shape = data.draw(st.sampled_from([(seq,), (seq, *x.shape[2:])]))
            ids = data.draw(hnp.arrays(np.intp, ids_shape, elements=st.integers(0, 5)))
            if beyond:
                ids.flat[data.draw(st.integers(0, ids.size - 1))] = 6
            where = {"positions": ids.tolist() if data.draw(st.booleans()) else ids}
        before = x.copy()
        expected = _outcome(partial(getattr(make(), name), x, **where))
        writing = data.draw(st.sampled_from(["new", "out", "in place"]))
        if isinstance(expected, tuple):
            got = _outcome(partial(encoding, x, **where))
            assert isinstance(got, tuple) and got == expected
        elif writing == "out":
            out = data.draw(
                arrays_in_any_layout(*x.shape[:2], st.just(expected.dtype), x.shape[2:])
            )
            assert encoding(x, out, **where) is out
            assert_bitwise_equal(out, expected)
        elif writing == "in place":  # float32 in, float32 out
            assert encoding(x, out=x, **where) is x
            assert_bitwise_equal(x, expected)
            x[...] = before
        else:
            y = encoding(x, **where)
            assert_bitwise_equal(y, expected)
            assert y.strides == expected.strides
        assert_bitwise_equal(x, before)


@given(data=st.data(), half=st.integers(1, 8))
def test_rope_preserves_the_norm_of_each_pair(data, half):
    rope = RoPE(2 * half, 6, T=np.float64)
    x = data.draw(hnp.arrays(np.float64, (2 * half, 6, 2), elements=st.floats(-1e6, 1e6)))
    y = rope(x)
    norm_x = np.hypot(x[:half], x[half:])
    norm_y = np.hypot(y[:half], y[half:])
    np.testing.assert_allclose(norm_y, norm_x, rtol=1e-12, atol=1e-300)


@given(data=st.data(), channels=st.sampled_from([1, 2, 4, 6]))
def test_absolute_matches_reference(data, channels):
    pe = AbsolutePE(channels, 6)
    x = data.draw(arrays_in_any_layout(data.draw(st.integers(1, 6)), channels))
    assert_bitwise_equal(pe(x), reference.absolute_apply(x, pe.embeddings))


@given(
    data=st.data(),
    channels=st.sampled_from([1, 2, 4, 6]),
    per_column=st.booleans(),
    run=st.booleans(),
)
def test_absolute_at_position_ids_matches_reference(data, channels, per_column, run):
    """Ids (seq,) or one per position and batch column, drawn or a run ``k,
    k + 1, ..`` (read as the offset ``k``), in every way of writing; a
    second round, which takes the calls remembered in the first, gives the
    same bits."""
    pe = AbsolutePE(channels, 6)
    x = data.draw(arrays_in_any_layout(data.draw(st.integers(1, 6)), channels))
    shape = (x.shape[0], *x.shape[2:]) if per_column else x.shape[:1]
    if run:
        start = data.draw(st.integers(0, 6 - x.shape[0]))
        column = np.arange(start, start + x.shape[0]).reshape(-1, *[1] * (len(shape) - 1))
        ids = np.broadcast_to(column, shape).copy()
    else:
        ids = data.draw(hnp.arrays(np.intp, shape, elements=st.integers(0, 5)))
    expected = reference.absolute_apply_ids(x, pe.embeddings, ids)
    for _ in range(2):
        assert_every_way_of_writing(partial(pe, positions=ids), x, expected)


@given(
    x=hnp.arrays(
        st.sampled_from([np.float32, np.int64]),
        hnp.array_shapes(min_dims=1, max_dims=4),
        elements=st.integers(-1000, 1000),
    ),
    data=st.data(),
)
def test_neg_half_twice_negates_even_axes(x, data):
    """The reference's halves, bit for bit, on any axis; on an even one,
    applied twice, ``-x`` (which a loop negating the wrong half also gives:
    hence the reference first)."""
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    assert_bitwise_equal(neg_half(x, dim), reference.neg_half(x, dim % x.ndim))
    if not x.shape[dim] % 2:
        np.testing.assert_array_equal(neg_half(neg_half(x, dim), dim), -x)


@given(
    lengths=st.lists(st.integers(-5, 20), min_size=1, max_size=8),
    max_len=st.integers(1, 16),
)
def test_padding_mask_marks_exactly_the_padding(lengths, max_len):
    mask = create_padding_mask(lengths, max_len)
    assert mask.shape == (1, max_len, len(lengths))
    for b, length in enumerate(lengths):
        assert mask[0, :, b].sum() == max_len - min(max(length, 0), max_len)
        assert not mask[0, : max(length, 0), b].any()


@given(
    shape=st.tuples(*[st.integers(0, 3)] * 3),
    strides=st.tuples(*[st.sampled_from([0, 4, 8, 16, -4, -8])] * 3),
)
def test_innermost_axis_is_the_smallest_stride_of_a_real_axis(shape, strides):
    """The loops' innermost axis: the smallest |stride| among axes longer
    than 1, the first on ties, axis 0 when there is none."""
    x = np.lib.stride_tricks.as_strided(np.zeros(64, np.float32)[32:], shape, strides)
    axes = enumerate(zip(shape, strides, strict=True))
    real = [(abs(stride), axis) for axis, (n, stride) in axes if n > 1]
    assert _kernels._smallest_stride(x) == (min(real)[1] if real else 0)
