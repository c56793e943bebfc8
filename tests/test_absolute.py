"""AbsolutePE against the slow reference, upstream's figures, and Julia's errors."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from positional_embeddings import AbsolutePE, LearnedPE, RoPE, _direct, _kernels, absolute, learned

import reference
from comparisons import (
    assert_bitwise_equal,
    assert_every_way_of_writing,
    assert_unwritable,
    refuse_checked_path,
    ulp_distance,
)
from test_rope import INPUT_DTYPES, SHORT_BATCHES, layouts, runs_recorded, sample, stored


def test_upstream_specific_output_values():
    """test/runtests.jl "specific output values" (printed to 6 figures there)."""
    head_size, seq_len, batch = 128, 100, 64
    n = head_size * seq_len * batch
    x = (np.arange(1, n + 1, dtype=np.float32) / np.float32(n)).reshape(
        head_size, seq_len, batch, order="F"
    )
    output = AbsolutePE(head_size, seq_len)(x.transpose(1, 0, 2))
    expected = np.array(
        [
            [1.2207e-6, 1.0, 3.66211e-6, 1.0, 6.10352e-6],
            [0.841628, 0.540461, 0.76188, 0.648067, 0.681724],
            [0.909611, -0.415832, 0.987362, -0.160119, 0.997799],
            [0.14159, -0.989521, 0.517778, -0.855327, 0.778747],
            [-0.756176, -0.653016, -0.316087, -0.947891, 0.14217],
        ],
        dtype=np.float32,
    )
    assert output.shape == (seq_len, head_size, batch)
    np.testing.assert_allclose(output[:5, :5, 0], expected, rtol=1e-5)


@pytest.mark.parametrize(
    "size,length,base",
    [(8, 10, 10_000), (1, 5, 10_000), (6, 10, 7), (64, 300, 500_000.0), (0, 3, 10)],
)
def test_table_matches_reference_within_one_ulp(size, length, base):
    pe = AbsolutePE(size, length, base)
    expected = reference.absolute_table(size, length, base)
    assert pe.embeddings.shape == (size, length)
    assert pe.embeddings.dtype == np.float32
    assert ulp_distance(pe.embeddings, expected).max(initial=0) <= 1
    assert not pe.embeddings.flags.writeable


def test_table_beyond_the_branch_free_reduction():
    """Angles from 2^20*pi/2 (about 1.65e6) on take Julia's Payne-Hanek
    reduction, beyond ``sincos_f64_moderate``: the table's positions around
    that bound are within 1 ULP of the float64 sin and cos, as the others."""
    length = 1_700_000
    pe = AbsolutePE(2, length)
    positions = np.r_[0:100, 1_640_000:1_660_000, length - 100 : length]
    angles = positions.astype(np.float64)
    assert angles.max() > 2.0**20 * np.pi / 2 > angles.min()
    for row, function in ((0, np.sin), (1, np.cos)):
        expected = function(angles).astype(np.float32)
        assert ulp_distance(pe.embeddings[row, positions], expected).max() <= 1


def test_size_one_is_a_single_sin_row():
    pe = AbsolutePE(1, 4)
    np.testing.assert_allclose(
        pe.embeddings[0], np.sin(np.arange(4.0)).astype(np.float32), rtol=1e-7
    )


@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_forward_matches_reference_in_every_layout(dtype):
    pe = AbsolutePE(6, 9)
    x = sample((5, 6, 3), dtype, seed=11)
    expected = reference.absolute_apply(x, pe.embeddings)
    assert expected.dtype == (np.float64 if dtype == np.float64 else np.float32)
    for name, view in layouts(x):
        before = view.copy()
        y = pe(view)
        assert_bitwise_equal(y, expected)
        assert_bitwise_equal(view, before)
        if name == "F":
            assert y.flags.f_contiguous


def test_position_major_table_is_kept_for_the_layouts_that_read_it():
    """Julia's order reads table rows; C order (batch innermost) and
    batch-first read a position-major copy that covers the positions used so
    far, grows by doubling up to max_length, and is reused."""
    pe = AbsolutePE(16, 100)
    x = sample((20, 16, 3), np.float32, seed=14)
    expected = reference.absolute_apply(x, pe.embeddings)
    assert_bitwise_equal(pe(np.asfortranarray(x)), expected)  # Julia's order: rows of the table
    assert pe._by_position is None
    assert_bitwise_equal(pe(np.ascontiguousarray(x)), expected)  # batch innermost: its columns
    table = pe._by_position
    assert table is not None and table.flags.f_contiguous and not table.flags.writeable
    assert_bitwise_equal(table, pe.embeddings[:, :20])
    batch_first = np.ascontiguousarray(x.transpose(2, 0, 1))
    assert_bitwise_equal(pe(batch_first, batch_first=True), expected.transpose(2, 0, 1))
    assert pe._by_position is table
    later = reference.absolute_apply(x, pe.embeddings[:, 5:25])
    assert_bitwise_equal(pe(np.ascontiguousarray(x), offset=5), later)
    assert pe._by_position.shape == (16, 40)
    end = reference.absolute_apply(x, pe.embeddings[:, 80:])
    assert_bitwise_equal(pe(np.ascontiguousarray(x), offset=80), end)
    assert_bitwise_equal(pe._by_position, pe.embeddings)


@pytest.mark.parametrize("shape", [(1, 4, 1), (3, 4, 2, 2), (3, 4, 1, 2, 2), (3, 4, 0)])
def test_forward_shapes(shape):
    pe = AbsolutePE(4, 3)
    x = sample(shape, np.float64, seed=12)
    for _, view in layouts(x):
        assert_bitwise_equal(pe(view), reference.absolute_apply(x, pe.embeddings))


def test_bool_input_follows_julias_ifelse():
    pe = AbsolutePE(2, 2)
    x = np.array([[[True], [False]], [[False], [True]]])
    assert_bitwise_equal(pe(x), reference.absolute_apply(x, pe.embeddings))


@pytest.mark.parametrize("order", ["C", "F"])
def test_out_and_in_place(order):
    pe = AbsolutePE(8, 10)
    x = np.asarray(sample((10, 8, 3), np.float32, seed=13), order=order)
    expected = pe(x)
    out = np.empty_like(x)
    assert pe(x, out=out) is out
    assert_bitwise_equal(out, expected)
    assert pe(x, out=x) is x
    assert_bitwise_equal(x, expected)


def batch_first(shape: tuple[int, int, int]) -> np.ndarray:
    """A (seq, channels, batch) float32 view of a C-order (batch, seq, channels) array."""
    seq, channels, batch = shape
    return sample((batch, seq, channels), np.float32, seed=16).transpose(1, 2, 0)


@pytest.mark.parametrize(
    "x, out_order, inner, kernel",
    [
        # a decoding step: its channels, as out
        (lambda: sample((1, 16, 16), np.float32), "F", 1, "_absolute_few_positions"),
        # the sequence innermost in out, not in x: tiles of positions
        (lambda: sample((2, 16, 16), np.float32), "F", 0, "_absolute_tiles"),
        (lambda: sample((37, 16, 16), np.float32), "F", 0, "_absolute_tiles"),
        (lambda: sample((20, 16, 32), np.float16), "F", 0, "_absolute_tiles"),
        (lambda: batch_first((37, 16, 4)), "F", 0, "_absolute_tiles"),
        # a batch of 16 bytes: as x
        (lambda: sample((20, 16, 4), np.float32), "F", 2, "_absolute_inner_channel"),
        (
            lambda: np.asfortranarray(sample((20, 16, 4), np.float32)),
            "C",
            2,
            "_absolute_inner_channel",
        ),
        # a sequence of 32 bytes: as x
        (lambda: np.asfortranarray(sample((8, 16, 16), np.float32)), "C", 0, "_absolute_inner_seq"),
        (lambda: sample((20, 16, 16), np.float32), "C", 2, "_absolute_inner_batch"),
    ],
    ids=[
        "step",
        "2 positions",
        "37 positions",
        "float16",
        "batch first",
        "short batch",
        "short batch from F",
        "short sequence",
        "same order",
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_out_laid_out_across_x(monkeypatch, x, out_order, inner, kernel, threads):
    """``out`` in the other memory order than ``x``: the loop follows
    ``out`` where ``x``'s runs along its innermost axis span a cache line
    (64 bytes), else ``x``, in tiles of positions where ``out`` has the
    sequence innermost; the bits of a new output either way, repeated (the
    remembered loop follows the same layout), on one thread or split over
    two, and ``x`` left alone."""
    x = x()
    pe = AbsolutePE(x.shape[1], 40)
    runs = runs_recorded(monkeypatch, threads)
    before = x.copy()
    out = np.empty(x.shape, np.float32, order=out_order)
    assert _kernels._absolute_inner(x, out) == inner
    expected = reference.absolute_apply(before, pe.embeddings[:, 3 : 3 + x.shape[0]])
    for _ in range(2):
        assert pe(x, out=out, offset=3) is out
        assert_bitwise_equal(out, expected)
    if threads == 1 or kernel != "_absolute_few_positions":  # a step split takes another loop
        assert runs[0].kernel.__name__ == kernel  # the first, checked call's
    assert_bitwise_equal(x, before)


@pytest.mark.parametrize("order", ["C", "F", "strided"])
@pytest.mark.parametrize("seq", [1, 2])
def test_repeated_decoding_calls_take_the_direct_path_with_the_same_results(order, seq):
    """After one checked call, decoding calls of the same layout (a position
    or two; allocating, with ``out``, in place) skip the checks' slow path and
    Numba's dispatch: the same bits, and the same refusals."""
    pe = AbsolutePE(16, 40)
    x = sample((seq, 16, 10), np.float32, seed=15)
    x = x[:, :, ::2] if order == "strided" else np.asarray(x[:, :, :5], order=order)
    for position in (0, 7, 40 - seq, 3):
        want = reference.absolute_apply(x, pe.embeddings[:, position : position + seq])
        y = assert_every_way_of_writing(partial(pe, offset=position), x, want)
    remembered = [
        (a.shape, a.strides, a.dtype, target) in pe._direct
        for a, target in ((x, _direct.NEW), (y, _direct.IN_PLACE))
    ]
    assert remembered == [True, True]
    with pytest.raises(ValueError, match="exceeds maximum length"):
        pe(x, offset=41 - seq)
    with pytest.raises(ValueError, match="offset"):
        pe(x, offset=-1)
    with pytest.raises(TypeError, match="dtype float32"):
        pe(x, out=np.empty_like(x, dtype=np.float64))
    memory = np.zeros(y.size + 1, np.float32)  # two arrays laid out as y, one element apart
    shifted = [np.lib.stride_tricks.as_strided(memory[i:], y.shape, y.strides) for i in (0, 1)]
    with pytest.raises(ValueError, match="overlaps"):
        pe(shifted[0], out=shifted[1])
    read_only = y.copy(order="K")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        pe(read_only, out=read_only, offset=1)


def test_calls_off_the_direct_path_do_not_search_for_it_every_time(monkeypatch):
    """Finding a remembered call's compiled loop costs tens of microseconds
    (Numba's typeof): a decoding loop finds it again only when the tables it
    may read grow (positions 0, 1, 2, 4, ... for AbsolutePE's position-major
    copy), and calls that never take the direct path search once per layout
    at most (ids given as lists) or never (``out`` another view of ``x``)."""
    searches = []
    compiled = _kernels._compiled
    monkeypatch.setattr(_kernels, "_compiled", lambda *a: searches.append(a) or compiled(*a))
    pe = AbsolutePE(16, 40)
    x = sample((1, 16, 8), np.float32, seed=16)
    for position in range(40):
        assert_bitwise_equal(pe(x, offset=position), x + pe.embeddings[:, position][:, None])
    assert 1 <= len(searches) <= 7  # the table grew to 1, 2, 4, ..., 40 positions
    rope = RoPE(16, 40)
    y = sample((16, 1, 8), np.float32, seed=17)
    searched = len(searches)
    by_position = [rope(y, positions=[position]) for position in range(5)]
    assert len(searches) == searched + 1  # the first call's, kept for ids arrays
    for position in range(5):
        same = y.copy()
        assert rope(same, out=same.view(), offset=position).base is same  # in place, another view
        assert_bitwise_equal(same, by_position[position])
    assert len(searches) == searched + 1
    unaligned = _unaligned(y)  # never taken by the direct path
    for position in range(5):
        assert_bitwise_equal(rope(y, offset=position), by_position[position])
        assert rope(y, out=unaligned, offset=position) is unaligned
        assert_bitwise_equal(unaligned, by_position[position])
    assert len(searches) == searched + 2  # and the first offset call's
    # Checked calls a record could have served (an ndarray subclass as x or
    # as ids) search no more, where its loop reads a copy of the tables'
    # first positions (covering fewer than the tables hold).
    wide, long = sample((16, 4, 8), np.float32, seed=18), AbsolutePE(16, 4000)
    searched = len(searches)
    for position in range(5):
        ids = np.arange(position, position + 4)
        assert_bitwise_equal(rope(wide, positions=ids.view(Subclass)), rope(wide, positions=ids))
        assert_bitwise_equal(
            long(x.view(Subclass), offset=position), x + long.embeddings[:, position][:, None]
        )
    assert len(searches) == searched + 2  # one for each layer's layout


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` (C order) at an address no element of its dtype is aligned to."""
    memory = np.frombuffer(bytearray(a.nbytes + 1), np.uint8)[1:]
    copy = memory.view(a.dtype).reshape(a.shape)
    copy[...] = a
    assert not copy.flags.aligned
    return copy


def test_remembered_calls_leave_unaligned_inputs_to_the_checks():
    """A remembered loop was compiled for aligned arrays (Numba's loads then
    assume each element's alignment): an unaligned ``x`` or unaligned ids of
    a remembered layout are left to the checked path, which runs the loop
    compiled for unaligned arrays; and a call on them is not remembered."""
    rope, pe = RoPE(16, 40), AbsolutePE(16, 40)
    x, step = sample((16, 1, 8), np.float32, seed=19), sample((1, 16, 8), np.float32, seed=20)
    ids = np.array([3])
    cases = ((rope, x, {"offset": 3}), (rope, x, {"positions": ids}), (pe, step, {"offset": 3}))
    for layer, a, kwargs in cases:
        where = (kwargs.get("offset", 0), kwargs.get("positions"))
        out = np.empty_like(a)
        expected = layer(a, **kwargs)
        assert_bitwise_equal(layer(a, out=out, **kwargs), expected)
        assert layer._direct.call(a, None, *where) is not None  # both remembered
        assert layer._direct.call(a, out, *where) is out
        crooked = _unaligned(a)
        assert layer._direct.call(crooked, None, *where) is None
        assert layer._direct.call(crooked, out, *where) is None
        assert_bitwise_equal(layer(crooked, **kwargs), expected)
        assert_bitwise_equal(layer(crooked, out=out, **kwargs), expected)
    crooked_ids = _unaligned(ids)
    assert rope._direct.call(x, None, 0, crooked_ids) is None
    assert_bitwise_equal(rope(x, positions=crooked_ids), rope(x, offset=3))
    fresh = RoPE(16, 40)
    fresh(_unaligned(x), offset=3)
    fresh(x, positions=crooked_ids)
    assert not fresh._direct


class Subclass(np.ndarray):
    """An ndarray subclass, which the layers take through their checks."""


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((7, 10), ValueError, "embedding_size must be even"),
        ((-2, 10), ValueError, "embedding_size must be >= 0"),
        ((4, -1), ValueError, "max_length must be >= 0"),
        ((4.0, 10), TypeError, "embedding_size must be an integer"),
        ((4, 10, "x"), TypeError, "base must be a real number"),
        ((8, 10, -3), ValueError, "base must not be negative"),
        ((4, 10, 0), ValueError, "only defined for finite x"),
    ],
)
def test_constructor_errors(args, error, match):
    with pytest.raises(error, match=match):
        AbsolutePE(*args)


@pytest.mark.parametrize(
    "shape,match",
    [
        ((4, 8), "at least 3 dimensions"),
        ((4, 6, 1), "Channel dimension must match embedding size"),
        ((11, 8, 1), "Sequence length exceeds maximum length"),
    ],
)
def test_call_errors(shape, match):
    with pytest.raises(ValueError, match=match):
        AbsolutePE(8, 10)(np.zeros(shape, np.float32))


def test_channel_checked_before_length():
    """Julia asserts the channel size first."""
    with pytest.raises(ValueError, match="Channel"):
        AbsolutePE(8, 10)(np.zeros((11, 6, 1), np.float32))


@pytest.mark.parametrize("order", ["C", "F"])
def test_decoding_steps_of_more_than_three_dims_take_the_direct_path(monkeypatch, order):
    """(1, features, batch, beams) steps: after a first checked call of each
    kind, later ones skip the checks through 3-D views of their merged batch
    axes, with the same bits and outputs in ``x``'s memory order."""
    pe = AbsolutePE(16, 40)
    x = np.asarray(sample((1, 16, 3, 2), np.float32, seed=4), order=order)

    def expected(position):
        return reference.absolute_apply(x, pe.embeddings[:, position : position + 1])

    assert_every_way_of_writing(partial(pe, offset=39), x, expected(39))  # the whole table
    monkeypatch.setattr(absolute, "add_embeddings", refuse_checked_path)
    for position in (7, 0, 38):
        assert_every_way_of_writing(partial(pe, offset=position), x, expected(position))
        assert pe(x, offset=position).flags[f"{order}_CONTIGUOUS"]


@pytest.mark.parametrize(
    "layout, kernel",
    [
        (lambda: sample((2, 16, 8), np.float32, seed=1), "_absolute_few_positions"),
        (lambda: np.asfortranarray(sample((5, 16, 4), np.float32, seed=2)), "_absolute_planes"),
        (lambda: np.asfortranarray(sample((5, 16, 4), np.float32, seed=3)), "_absolute_inner_seq"),
        (lambda: stored(sample((5, 16, 4), np.float32, seed=3), (0, 2, 1)), "_absolute_seq_major"),
        (
            lambda: sample((4, 5, 16), np.float32, seed=4).transpose(1, 2, 0),
            "_absolute_inner_channel",
        ),
        (lambda: sample((5, 16, 4), np.float32, seed=5), "_absolute_short_batch"),
        # a view (contiguous arrays take the unrolled loop), float16: no in-place copy
        (lambda: sample((5, 16, 8), np.float16, seed=5)[:, :, :6], "_absolute_inner_channel"),
        (lambda: sample((5, 16, 32), np.float32, seed=6), "_absolute_inner_batch"),
    ],
    ids=[
        "step",
        "planes",
        "rows",
        "seq major",
        "batch first",
        "short batch",
        "6 of 8 columns",
        "batch inner",
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("encoding", ["absolute", "learned"])
def test_every_loop_is_remembered(monkeypatch, layout, kernel, encoding, threads):
    """Repeated calls of one layout skip the checks whichever loop the layout
    takes, not only a decoding step's (a chunk of positions, a short
    prompt), for AbsolutePE and LearnedPE, on one thread or split over two:
    after a first checked call of each kind (allocating, ``out``, in place),
    later ones at other offsets give the oracle's bits without the checks'
    slow path; beyond the table, the checks raise Julia's error.  (The loop
    named is AbsolutePE's on one thread: a step split over threads takes
    another, and LearnedPE's table, position-major, others again.)
    """
    if kernel == "_absolute_inner_seq":  # the row loop, for sequences longer than 4
        monkeypatch.setattr(_kernels, "_SHORT_SEQUENCE", 4)
    module = {"absolute": absolute, "learned": learned}[encoding]
    pe = AbsolutePE(16, 40) if encoding == "absolute" else LearnedPE(40, 16, seed=7)
    table = pe.embeddings if encoding == "absolute" else pe.embeddings.T
    runs = runs_recorded(monkeypatch, threads)
    x = layout()
    seq = x.shape[0]

    def expected(position):
        return reference.absolute_apply(x, table[:, position : position + seq])

    assert_every_way_of_writing(partial(pe, offset=40 - seq), x, expected(40 - seq))
    if encoding == "absolute" and threads == 1:
        assert {run.kernel.__name__ for run in runs} == {kernel}
    checked = module.add_embeddings
    monkeypatch.setattr(module, "add_embeddings", refuse_checked_path)
    for position in (7, 0, 39 - seq):
        assert_every_way_of_writing(partial(pe, offset=position), x, expected(position))
    monkeypatch.setattr(module, "add_embeddings", checked)
    with pytest.raises(ValueError, match="exceeds maximum length"):
        pe(x, offset=41 - seq)


@pytest.mark.parametrize(
    "batch, dtype",
    [*SHORT_BATCHES, (5, np.float32), (8, np.float32), (6, np.float16), (7, np.int8)],
)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("encoding", ["absolute", "learned"])
def test_short_batches_in_c_order(monkeypatch, batch, dtype, threads, encoding):
    """C-contiguous arrays whose batch rows of 2 or more columns hold at most
    32 bytes (float32 results: up to 8 columns), too short to vectorise, run
    a loop unrolled along the batch (``_absolute_short_batch``) for
    AbsolutePE and LearnedPE (whose table is laid out otherwise): the
    oracle's bits allocating, into ``out`` and in place, at offsets, on one
    thread or two, and ``x`` left alone."""
    pe = AbsolutePE(16, 40) if encoding == "absolute" else LearnedPE(40, 16, seed=7)
    table = pe.embeddings if encoding == "absolute" else pe.embeddings.T
    runs = runs_recorded(monkeypatch, threads)
    x = sample((9, 16, batch), dtype, seed=batch)
    before = x.copy()
    for position in (0, 31, 5):
        expected = reference.absolute_apply(x, table[:, position : position + 9])
        assert_every_way_of_writing(partial(pe, offset=position), x, expected)
    assert_bitwise_equal(x, before)
    if threads == 1:
        assert {run.kernel.__name__ for run in runs} == {"_absolute_short_batch"}


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((9, 16, 5), np.float64),
        ((9, 16, 9), np.float32),
        ((9, 16, 5), np.int64),
        ((9, 16, 9), np.float16),
    ],
    ids=[
        "float64 rows of 40 bytes",
        "float32 rows of 36 bytes",
        "int64 rows of 40 bytes",
        "float16 rows of 18 bytes, 36 in the result",
    ],
)
def test_longer_batch_rows_take_the_batch_loop(monkeypatch, shape, dtype):
    """Batch rows of more than 32 bytes, in ``x`` or in the result, keep the
    batch loop, which vectorises them (the unrolled loop gained at most 1.35x
    there, and took up to 8x as long in place; the channel loop, float16
    into float32, 2.4-9.9x as long)."""
    pe = AbsolutePE(16, 40)
    runs = runs_recorded(monkeypatch, 1)
    x = sample(shape, dtype, seed=3)
    assert_bitwise_equal(pe(x), reference.absolute_apply(x, pe.embeddings[:, :9]))
    assert {run.kernel.__name__ for run in runs} == {"_absolute_inner_batch"}


@pytest.mark.parametrize("order", ["C", "F"])
def test_float16_decoding_steps_take_the_direct_path(monkeypatch, order):
    """float16 steps (float32 results: the table is float32), allocating and
    with ``out``: after a checked call of each, later ones skip the checks,
    with the same bits."""
    pe = AbsolutePE(16, 40)
    x = np.asarray(sample((1, 16, 5), np.float16, seed=5), order=order)
    out = np.empty_like(x, dtype=np.float32)

    def steps(position: int) -> None:
        expected = reference.absolute_apply(x, pe.embeddings[:, position : position + 1])
        assert_bitwise_equal(pe(x, offset=position), expected)
        assert pe(x, out=out, offset=position) is out
        assert_bitwise_equal(out, expected)

    steps(39)  # the whole table
    monkeypatch.setattr(absolute, "add_embeddings", refuse_checked_path)
    for position in (7, 0, 38):
        steps(position)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("flag", [True, np.True_])
def test_batch_first_decoding_steps_take_the_direct_path(monkeypatch, order, flag):
    """Batch-first decoding steps (batch, 1, features), allocating, with
    ``out`` and in place, are remembered as the (1, features, batch) views
    they are (``batch_first`` a Python or a numpy bool): after a first
    checked call of each kind, the same bits without the checks' slow path,
    and outputs in ``x``'s memory order."""
    pe = AbsolutePE(16, 40)
    x = np.asarray(sample((5, 1, 16), np.float32, seed=3), order=order)

    def expected(position):
        table = pe.embeddings[:, position : position + 1]
        return reference.absolute_apply(x.transpose(1, 2, 0), table).transpose(2, 0, 1)

    step = partial(pe, batch_first=flag)
    assert_every_way_of_writing(partial(step, offset=39), x, expected(39))  # the whole table
    checked = absolute.add_embeddings
    monkeypatch.setattr(absolute, "add_embeddings", refuse_checked_path)
    for position in (7, 0, 38):
        assert_every_way_of_writing(partial(step, offset=position), x, expected(position))
        assert step(x, offset=position).flags[f"{order}_CONTIGUOUS"]
    with pytest.raises(AssertionError, match="checked path"):
        step(x, offset=40)  # beyond the table: the checks raise Julia's error
    monkeypatch.setattr(absolute, "add_embeddings", checked)
    with pytest.raises(ValueError, match="exceeds maximum length"):
        step(x, offset=40)


@pytest.mark.parametrize("make", [partial(AbsolutePE, 6, 10), partial(LearnedPE, 10, 6, seed=1)])
@pytest.mark.parametrize(
    "x",
    [
        np.ones((1, 3, 6), np.float32),
        np.ones((1, 3, 6), np.float32, order="F"),
        np.ones((2, 1, 6), np.float32),
        np.ones((2, 1, 6), np.float32, order="F"),
        np.ones((1, 1, 6), np.float32),
        np.ones((4, 9, 6), np.float32)[:1, 2:5],  # a batch-first slice: neither order
        np.ones((3, 9, 6), np.float32)[:, 4:5],
    ],
    ids=["1x3 C", "1x3 F", "2x1 C", "2x1 F", "1x1", "1x3 slice", "3x1 slice"],
)
def test_batch_first_new_outputs_keep_one_layout(make, x):
    """A batch-first step's new output has the strides of the first, checked
    call's (``np.empty_like(x)``) on every axis, those of length 1 too,
    though the step is remembered for the (seq, features, batch) view of
    ``x``, a view whose own new output numpy lays out otherwise; and a
    caller passing that very view is given its own layout."""
    pe = make()
    expected = np.empty_like(x).strides
    for _ in range(3):  # checked, then remembered
        assert pe(x, batch_first=True, offset=2).strides == expected
    view = x.transpose(1, 2, 0)
    for _ in range(3):
        assert pe(view, offset=2).strides == np.empty_like(view).strides
        assert pe(x, batch_first=True, offset=2).strides == expected


@pytest.mark.parametrize("field", ["embedding_size", "max_length", "embeddings"])
def test_fields_are_read_only_as_in_julias_immutable_struct(field):
    """Assigning a field raises (it was taken, and the calls of layouts that
    read the kept copy of the table went on reading the old one)."""
    pe = AbsolutePE(4, 8)
    x = sample((3, 4, 2), np.float32, seed=40)
    expected = reference.absolute_apply(x, pe.embeddings)
    pe(np.ascontiguousarray(x))  # C order: a copy of the table is kept
    with pytest.raises(AttributeError, match=field):
        setattr(pe, field, np.ones((4, 8), np.float32) if field == "embeddings" else 2)
    assert_unwritable(pe.embeddings)  # nor can the table be made writeable
    for _, view in layouts(x):
        assert_bitwise_equal(pe(view), expected)
