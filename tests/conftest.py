"""Shared test configuration: hypothesis profiles and small helpers."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between float arrays of one dtype.

    Equal NaN positions count as 0 apart, +0 and -0 as 1 apart (signed zeros
    matter for bit parity).
    """
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia = a.view(bits).astype(np.int64)
    ib = b.view(bits).astype(np.int64)
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -(ia + sign) - 1, ia)  # monotone: -0.0 -> -1, +0.0 -> 0
    ib = np.where(ib < 0, -(ib + sign) - 1, ib)
    distance = np.abs(ia - ib)
    return np.where(np.isnan(a) & np.isnan(b), 0, distance)


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
