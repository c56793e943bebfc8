"""Any array-like goes in, numpy comes out: lists, views, read-only buffers,
arrays in either byte order, ``__array__`` and DLPack producers, and torch
CPU tensors where torch is installed."""

from __future__ import annotations

import array

import numpy as np
import pytest

from positional_embeddings import AbsolutePE, LearnedPE, RoPE, neg_half

from comparisons import assert_bitwise_equal

ROPE = RoPE(4, 8)
X = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2) / 7


class ArrayLike:
    """Exposes only ``__array__`` (as xarray, pandas and many others do)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


class DLPackOnly:
    """Exposes only the DLPack protocol."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __dlpack__(self, **kwargs):
        return self.values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.values.__dlpack_device__()


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.tolist(),
        lambda x: tuple(map(tuple, x.reshape(4, -1).tolist())),
        lambda x: np.asfortranarray(x),
        lambda x: ArrayLike(x),
        lambda x: np.from_dlpack(DLPackOnly(x)),
        lambda x: memoryview(x),
    ],
    ids=["list", "tuple", "F-order", "__array__", "dlpack", "memoryview"],
)
def test_array_likes(make):
    source = make(X)
    if isinstance(source, tuple):
        source = np.asarray(source, dtype=np.float32).reshape(4, 3, 2)
    expected = ROPE(X.astype(np.asarray(source).dtype))
    result = ROPE(source)
    assert type(result) is np.ndarray
    assert_bitwise_equal(result, expected)


def test_python_buffers_and_read_only_memory():
    buffer = array.array("f", X.ravel().tolist())
    as_view = np.frombuffer(buffer, dtype=np.float32).reshape(4, 3, 2)
    frozen = np.frombuffer(X.tobytes(), dtype=np.float32).reshape(4, 3, 2)
    assert not frozen.flags.writeable
    assert_bitwise_equal(ROPE(as_view), ROPE(X))
    assert_bitwise_equal(ROPE(frozen), ROPE(X))


def test_no_copy_of_a_numpy_input():
    """The kernels read the caller's memory: a view of a huge array is never copied."""
    base = np.zeros((4, 8, 1000), np.float32)
    view = base[:, :, ::100]
    before = base.copy()
    ROPE(view)
    assert np.shares_memory(view, base)
    assert_bitwise_equal(base, before)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.float32, np.float64])
def test_arrays_in_the_other_byte_order_give_the_same_bits(dtype):
    """Data read from a big-endian file: every layer gives the native array's
    bits, in the machine's byte order, the first time and when repeated (a
    decoding loop); the input is not changed."""
    learned = LearnedPE(8, 4, seed=0)
    calls = [
        lambda a: ROPE(a, offset=2),
        lambda a: ROPE(a[:, :1], offset=5),
        ROPE.backward,
        lambda a: AbsolutePE(4, 8)(a.transpose(1, 0, 2), offset=1),
        lambda a: AbsolutePE(4, 8)(a[:, :1].transpose(1, 0, 2), offset=4),
        lambda a: learned(a.transpose(1, 0, 2)),
    ]
    native = (X * 7).astype(dtype)
    swapped = native.astype(native.dtype.newbyteorder("S"))
    before = swapped.copy()
    for call in calls:
        for _ in range(2):
            result = call(swapped)
            assert result.dtype.isnative
            assert_bitwise_equal(result, call(native))
    assert_bitwise_equal(swapped, before)


def test_tables_in_the_other_byte_order():
    """Tables given in the other byte order: RoPE copies them into the
    machine's; LearnedPE.from_table, which uses its table as it is, refuses."""
    tables = (ROPE.cos_cached, ROPE.sin_cached)
    swapped = [table.astype(table.dtype.newbyteorder("S")) for table in tables]
    rope = RoPE.from_tables(4, *swapped)
    assert rope.cos_cached.dtype.isnative and rope.sin_cached.dtype.isnative
    assert_bitwise_equal(rope(X), ROPE(X))
    assert_bitwise_equal(RoPE(4, 8, T=np.dtype(">f4")).cos_cached, ROPE.cos_cached)
    table = np.zeros((8, 4), np.float32)
    with pytest.raises(TypeError, match="byte order"):
        LearnedPE.from_table(table.astype(table.dtype.newbyteorder("S")))


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    tensor = torch.from_numpy(X.copy())
    result = ROPE(tensor)
    assert type(result) is np.ndarray
    assert_bitwise_equal(result, ROPE(X))
    pe = AbsolutePE(4, 8)
    assert_bitwise_equal(
        pe(torch.from_numpy(X.transpose(1, 0, 2).copy())), pe(X.transpose(1, 0, 2))
    )
    assert_bitwise_equal(neg_half(torch.from_numpy(X)), neg_half(X))
