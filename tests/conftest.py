"""Shared test configuration: hypothesis profiles and small helpers."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings

from parity.compare import ulp_distance

__all__ = ["assert_bitwise_equal", "ulp_distance"]

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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
