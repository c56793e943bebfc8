"""The loops' walk down their outer range, in blocks of about 256 KiB of
output: every unit once, the highest block first, and the oracle's bits on
arrays that span several blocks in every loop family."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from positional_embeddings import AbsolutePE, RoPE, _kernels

from comparisons import assert_bitwise_equal, split_over
from test_rope import sample


@given(
    start=st.integers(0, 300),
    length=st.integers(0, 300),
    units=st.integers(1, 10**6),
    nbytes=st.integers(0, 1 << 32),
)
def test_blocks_cover_the_range_once_from_the_top(start, length, units, nbytes):
    """Blocks of ``max(1, _BLOCK_BYTES * units // nbytes)`` units, the
    highest first, cover ``start .. stop`` once; only the lowest may be
    short."""
    stop = start + length
    count, size = _kernels._blocks_down(start, stop, units, nbytes)
    assert size == max(1, _kernels._BLOCK_BYTES * units // max(nbytes, 1))
    blocks = [_kernels._block_down(start, stop, size, k) for k in range(count)]
    assert [u for lo, hi in reversed(blocks) for u in range(lo, hi)] == list(range(start, stop))
    assert all(hi - lo == size for lo, hi in blocks[:-1])
    assert all(0 < hi - lo <= size for lo, hi in blocks)


@given(start=st.integers(0, 300), length=st.integers(0, 300), width=st.integers(1, 40))
def test_rows_and_columns_walk_a_flat_range_once_in_order(start, length, width):
    """``_rows`` and each row's ``_columns`` (first, length) visit the units
    ``start .. stop`` of a (rows, width) grid once, in order, every column
    inside its row (``_rows`` as Python: a compiled range stays compiled)."""
    stop = start + length
    visited = []
    for row in _kernels._rows.py_func(start, stop, width):
        first, count = _kernels._columns(start, stop, width, row)
        assert 0 <= first and first + count <= width
        visited += [row * width + first + j for j in range(count)]
    assert visited == list(range(start, stop))


def _families():
    """(name, encoding, input): one input per loop family, each writing
    1-6 MB, so that its outer range spans several blocks, the lowest one
    short."""
    rope, odd = RoPE(8, 20_000), RoPE(7, 2_000, interleaved=True)
    pe, wide = AbsolutePE(8, 20_000), AbsolutePE(1_100, 256)
    f64, f32 = np.float64, np.float32
    return [
        ("rope, batch innermost", rope, sample((8, 2_000, 9), f64, seed=1)),
        ("rope, head innermost", rope, np.asfortranarray(sample((8, 2_000, 9), f64, seed=2))),
        ("rope, odd interleaved", odd, sample((7, 2_000, 9), f64, seed=3)),
        ("rope, sequence innermost", rope, sample((8, 20_000, 1), f64, seed=4)),
        ("rope, short batch", rope, sample((8, 20_000, 2), f64, seed=10)),
        ("pe, batch innermost", pe, sample((2_000, 8, 9), f64, seed=5)),
        ("pe, sequence innermost", pe, np.asfortranarray(sample((300, 8, 300), f64, seed=6))),
        ("pe, short batch", pe, sample((20_000, 8, 2), f64, seed=7)),
        ("pe, batch first", pe, sample((3, 2_000, 8), f64, seed=8)),
        ("pe, planes in groups", wide, np.asfortranarray(sample((256, 1_100, 3), f32, seed=9))),
    ]


def _expected(layer, x, batch_first):
    """RoPE: the same encoding on pieces of at most 100 positions (each
    within one block; those loops are checked against the oracle
    elsewhere).  AbsolutePE: x plus the table, one rounding per element, as
    numpy adds (its oracle's arithmetic)."""
    if isinstance(layer, RoPE):
        pieces = [layer(x[:, a : a + 100], offset=a) for a in range(0, x.shape[1], 100)]
        return np.concatenate(pieces, axis=1)
    if batch_first:
        return x + layer.embeddings[:, : x.shape[1]].T[np.newaxis]
    return x + layer.embeddings[:, : x.shape[0]].T[:, :, np.newaxis]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", range(len(_families())), ids=[f[0] for f in _families()])
def test_loops_walking_down_give_the_bits_of_short_calls(monkeypatch, threads, case):
    """Allocating, into ``out`` and in place, on one thread or split over
    two (each thread walks its own range down): the bits of the short calls
    or the oracle's arithmetic, and ``x`` left alone."""
    split_over(monkeypatch, threads)
    name, layer, x = _families()[case]
    kw = {"batch_first": True} if "batch first" in name else {}
    expected = _expected(layer, x, bool(kw))
    before = x.copy(order="K")
    assert_bitwise_equal(layer(x, **kw), expected)
    out = np.empty_like(expected)
    assert layer(x, out=out, **kw) is out
    assert_bitwise_equal(out, expected)
    assert_bitwise_equal(x, before)
    assert layer(x, out=x, **kw) is x
    assert_bitwise_equal(x, expected)
