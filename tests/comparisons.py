"""Bit-for-bit assertions shared by the tests, a stand-in for the checked path, and a
memory probe."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from parity.compare import ulp_distance
from positional_embeddings import _parallel

__all__ = [
    "assert_bitwise_equal",
    "assert_every_way_of_writing",
    "assert_unwritable",
    "peak_memory",
    "refuse_checked_path",
    "split_over",
    "ulp_distance",
]


def assert_bitwise_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape, dtype and bits (NaN positions must match, payloads need not)."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind == "f":
        distance = ulp_distance(actual, expected)
        assert distance.max(initial=0) == 0, (
            f"{np.count_nonzero(distance)} of {distance.size} elements differ, "
            f"up to {distance.max()} ULP"
        )
    else:
        np.testing.assert_array_equal(actual, expected)


def assert_every_way_of_writing(
    call: Callable[..., np.ndarray], x: np.ndarray, expected: np.ndarray
) -> np.ndarray | None:
    """``call(x)``, ``call(x, out=out)`` and, where ``x`` can hold the result
    (its dtype is ``expected``'s), ``call(y, out=y)`` on a copy ``y`` of
    ``x`` (in place) all give ``expected``, the latter two returning the
    array they wrote; returns ``y`` (None where there is none)."""
    assert_bitwise_equal(call(x), expected)
    out = np.empty_like(x, dtype=expected.dtype)
    assert call(x, out=out) is out
    assert_bitwise_equal(out, expected)
    if x.dtype != expected.dtype:
        return None
    y = x.copy(order="K")
    assert call(y, out=y) is y
    assert_bitwise_equal(y, expected)
    return y


def assert_unwritable(table: np.ndarray) -> None:
    """Neither ``table`` nor the memory it views (its ``base``) can be made
    writeable: a layer's table changed under it would disagree with the
    copies its loops read."""
    with pytest.raises(ValueError, match="WRITEABLE"):
        table.flags.writeable = True
    if isinstance(table.base, np.ndarray):
        with pytest.raises(ValueError, match="WRITEABLE"):
            table.base.flags.writeable = True
    else:
        assert memoryview(table.base).readonly


def refuse_checked_path(*args: object, **kwargs: object) -> None:
    """Monkeypatched over the checked path where a test expects a remembered call."""
    raise AssertionError("took the checked path")


def split_over(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Calls run on ``threads`` threads for the test: with 2, every call is
    split (however small), with 1, none is."""
    monkeypatch.setattr(_parallel, "_threads", threads)
    monkeypatch.setattr(_parallel, "MIN_BYTES_PER_THREAD", 1 if threads > 1 else 1 << 40)


def peak_memory(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and the most memory it held at once, in bytes,
    as ``tracemalloc`` counts it (numpy's array data included)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
