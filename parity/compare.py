"""Bit-for-bit comparison of arrays, with the distance in ULP where they differ."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Comparison", "compare", "ulp_distance"]

_SIGNED = {2: np.int16, 4: np.int32, 8: np.int64}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between two float arrays of one dtype.

    Floats are mapped to integers that count representable values in order,
    so +0 and -0 are 1 apart (signed zeros matter for bit parity) and
    neighbours are 1 apart; NaN against NaN counts as 0 (payloads may differ),
    NaN against a number as the largest distance.
    """
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"cannot compare {a.dtype}{a.shape} with {b.dtype}{b.shape}")
    bits = _SIGNED[a.dtype.itemsize]
    ia = np.ascontiguousarray(a).view(bits).astype(np.int64)
    ib = np.ascontiguousarray(b).view(bits).astype(np.int64)
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -(ia + sign) - 1, ia)
    ib = np.where(ib < 0, -(ib + sign) - 1, ib)
    distance = np.abs(ia - ib)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    distance = np.where(nan_a & nan_b, 0, distance)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, distance)


@dataclass(frozen=True)
class Comparison:
    """How an output compares with the expected one."""

    same_shape_and_dtype: bool
    max_ulp: int
    differing: int
    size: int

    @property
    def bitwise(self) -> bool:
        return self.same_shape_and_dtype and self.differing == 0

    def describe(self) -> str:
        if not self.same_shape_and_dtype:
            return "different shape or dtype"
        return f"{self.differing} of {self.size} elements differ, up to {self.max_ulp} ULP"


def compare(actual: np.ndarray, expected: np.ndarray) -> Comparison:
    """Compare bit for bit: same shape, dtype and bits (NaN payloads aside)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Comparison(False, 0, expected.size, expected.size)
    if expected.dtype.kind == "f":
        distance = ulp_distance(actual, expected)
        return Comparison(
            True, int(distance.max(initial=0)), int(np.count_nonzero(distance)), expected.size
        )
    differing = int(np.count_nonzero(actual != expected))
    return Comparison(True, int(differing > 0), differing, expected.size)
