"""Bit-for-bit assertions shared by the tests."""

from __future__ import annotations

import numpy as np

from parity.compare import ulp_distance

__all__ = ["assert_bitwise_equal", "ulp_distance"]


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
