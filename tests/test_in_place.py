"""In place (``out=x``): the same bits as a separate output in every loop and
layout, through loops compiled for one array, and the cases that must stay
two arrays."""

from __future__ import annotations

import numpy as np
import pytest

from positional_embeddings import AbsolutePE, RoPE, _direct, _kernels

from comparisons import assert_bitwise_equal, split_over
from test_rope import layouts, sample


@pytest.fixture
def handed_out(monkeypatch):
    """What the compiled loops were handed as ``out`` (None: write into ``x``)."""
    seen: list[object] = []
    run_ranges = _kernels.run_ranges

    def spy(kernel, length, cost, x, out, *args):
        seen.append(out)
        return run_ranges(kernel, length, cost, x, out, *args)

    monkeypatch.setattr(_kernels, "run_ranges", spy)
    return seen


def _calls(T=np.float32):
    """(name, encoding call, input shape): every loop family of both encodings,
    on new encodings (no direct call remembered from an earlier test), RoPE
    with tables of type ``T``."""
    rope, odd = RoPE(8, 300, T=T), RoPE(7, 300, interleaved=True, T=T)
    pe = AbsolutePE(8, 300)

    def ids(x):  # one position id per position and batch column
        return np.random.default_rng(3).integers(0, 300, x.shape[1:])

    return [
        ("rope", lambda x, **kw: rope(x, offset=5, **kw), (8, 150, 3)),
        ("rope, odd interleaved", lambda x, **kw: odd(x, **kw), (7, 150, 3)),
        ("rope, ids per column", lambda x, **kw: rope(x, positions=ids(x), **kw), (8, 150, 3)),
        ("rope, one batch column", lambda x, **kw: rope(x, **kw), (8, 150, 1)),
        ("rope, decoding", lambda x, **kw: rope(x, offset=299, **kw), (8, 1, 3)),
        ("rope backward", lambda x, **kw: rope.backward(x, **kw), (8, 150, 3)),
        ("pe", lambda x, **kw: pe(x, offset=7, **kw), (150, 8, 3)),
        ("pe, long sequence", lambda x, **kw: pe(x, **kw), (300, 8, 3)),
        ("pe, short batch", lambda x, **kw: pe(x, **kw), (150, 8, 2)),
        ("pe, batch first", lambda x, **kw: pe(x, batch_first=True, **kw), (3, 150, 8)),
    ]


_IN_PLACE_CASES = [
    pytest.param(dtype, case, id=f"{name}-{np.dtype(dtype).name}")
    for dtype in (np.float16, np.float32, np.float64)
    for case, (name, _, _) in enumerate(_calls())
    if not (dtype == np.float16 and name.startswith("pe"))  # float16 + float32 table: float32
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("dtype", "case"), _IN_PLACE_CASES)
def test_in_place_gives_the_bits_of_a_separate_output(
    monkeypatch, handed_out, threads, dtype, case
):
    """Every loop (each memory order, a strided view, 4-D input, split over
    threads or not) writes in place what it writes into a separate array,
    and is handed None for ``out``: the loop compiled for one array (float16
    too, with float16 tables: read as records of its bits, written through
    a view of them)."""
    split_over(monkeypatch, threads)
    name, call, shape = _calls(dtype if dtype == np.float16 else np.float32)[case]
    four_d = sample((*shape[:2], 2, shape[2]), dtype, seed=len(name))
    for x in (sample(shape, dtype, seed=len(name)), four_d):
        if "batch first" in name and x.ndim > 3:
            continue
        for _, laid_out in layouts(x):
            expected = call(laid_out.copy(order="K"))
            handed_out.clear()
            assert call(laid_out, out=laid_out) is laid_out
            assert_bitwise_equal(laid_out, expected)
            assert handed_out and all(out is None for out in handed_out), name


def test_two_arrays_where_one_cannot_stand_for_both(handed_out):
    """Integers rewritten as floats of the same size, and a read-only input
    whose memory ``out`` may write: correct, through the two-array loops."""
    rope, pe = RoPE(8, 20), AbsolutePE(8, 20)
    integers = sample((8, 20, 3), np.int32, seed=2)
    memory = sample((20, 8, 3), np.float32, seed=3)
    read_only = memory.view()
    read_only.flags.writeable = False
    expected = [rope(integers), pe(read_only)]
    handed_out.clear()
    as_floats = integers.view(np.float32)
    assert rope(integers, out=as_floats) is as_floats
    assert pe(read_only, out=memory) is memory
    for got, want in zip((as_floats, memory), expected, strict=True):
        assert_bitwise_equal(got, want)
    assert len(handed_out) == 2 and all(out is not None for out in handed_out)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("order", ["C", "F"])
def test_repeated_decoding_in_place_takes_its_own_direct_call(order, dtype):
    """After one checked in-place call, in-place calls of the same layout
    skip dispatch with a loop compiled for one array; a separate ``out`` and
    a read-only input still get their own path and checks."""
    rope = RoPE(16, 40, T=dtype)
    x = np.asarray(sample((16, 1, 4), dtype, seed=41), order=order)
    full = rope(np.asarray(np.concatenate([x] * 40, axis=1), order=order))
    for position in (3, 0, 39, 3):
        y = x.copy(order="K")
        assert rope(y, out=y, offset=position) is y
        assert_bitwise_equal(y, full[:, position : position + 1])
    assert (x.shape, x.strides, x.dtype, _direct.IN_PLACE) in rope._direct
    out = np.empty_like(x)
    assert rope(x, out=out, offset=7) is out
    assert_bitwise_equal(out, full[:, 7:8])
    read_only = x.copy(order="K")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        rope(read_only, out=read_only, offset=1)


@pytest.mark.parametrize(
    ("name", "unit"), [("rope", 1), ("rope, decoding", 2), ("pe", 2), ("pe, batch first", 0)]
)
def test_out_viewing_x_s_elements_with_other_strides_on_axes_of_length_1_is_in_place(
    handed_out, name, unit
):
    """``out`` that views exactly ``x``'s elements, its strides differing
    only along an axis of length 1 (``a.reshape(8, 1, 4)`` into
    ``a[:, None]``), is ``x`` written in place: it was refused as an
    ``out`` overlapping ``x``."""
    call, shape = next((call, shape) for n, call, shape in _calls() if n == name)
    x = sample(tuple(1 if axis == unit else n for axis, n in enumerate(shape)), np.float32, seed=4)
    expected = call(x.copy())
    strides = tuple(4096 if axis == unit else s for axis, s in enumerate(x.strides))
    out = np.lib.stride_tricks.as_strided(x, x.shape, strides)
    handed_out.clear()
    assert call(x, out=out) is out
    assert_bitwise_equal(x, expected)
    assert handed_out and all(o is None for o in handed_out)
