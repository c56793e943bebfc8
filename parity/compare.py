"""Bit-for-bit comparison of outputs, with the distance in ULP where they differ.

Used by the fixture replay, the live suite and the report.  Two arrays agree
when they have the same shape, the same dtype and the same bits, except
that NaN payloads may differ (NaN positions must not).  Signed zeros count:
``+0.0`` and ``-0.0`` are one ULP apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["Comparison", "compare", "compare_outputs", "describe_failures", "ulp_distance"]

_SIGNED = {2: np.int16, 4: np.int32, 8: np.int64}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise distance in units in the last place between two float arrays.

    Each float is mapped to an integer that counts representable values in
    order, so neighbours are 1 apart and ``+0.0``/``-0.0`` are 1 apart too.

    Parameters
    ----------
    a, b : numpy.ndarray
        Float16, Float32 or Float64 arrays of one dtype and one shape.

    Returns
    -------
    numpy.ndarray
        int64 distances, shape of ``a``: 0 where the bits agree or both are
        NaN (payloads may differ), the largest int64 where only one is NaN.

    Raises
    ------
    ValueError
        If the dtypes or shapes differ, or the dtype is not a float one.
    """
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"cannot compare {a.dtype}{a.shape} with {b.dtype}{b.shape}")
    if a.dtype.kind != "f" or a.dtype.itemsize not in _SIGNED:
        raise ValueError(f"ulp_distance needs float16/32/64 arrays, got {a.dtype}")
    bits = _SIGNED[a.dtype.itemsize]
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.ascontiguousarray(a).view(bits).astype(np.int64)
    ib = np.ascontiguousarray(b).view(bits).astype(np.int64)
    ia = np.where(ia < 0, -(ia + sign) - 1, ia)
    ib = np.where(ib < 0, -(ib + sign) - 1, ib)
    distance = np.abs(ia - ib)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    distance = np.where(nan_a & nan_b, 0, distance)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, distance)


@dataclass(frozen=True)
class Comparison:
    """How one output compares with the expected one.

    Attributes
    ----------
    actual, expected : str
        Dtype and shape of each, e.g. ``"float32(16, 10, 3)"``.
    max_ulp : int
        Largest elementwise distance: in ULP for floats, the absolute
        difference for integers, 1 for a differing bool; 0 when the shapes
        or dtypes differ (nothing is compared).
    differing : int
        How many elements differ (all of them when the shapes or dtypes do).
    nan_mismatches : int
        How many elements are NaN on one side only.
    size : int
        Number of expected elements.
    """

    actual: str
    expected: str
    max_ulp: int
    differing: int
    nan_mismatches: int
    size: int

    @property
    def same_shape_and_dtype(self) -> bool:
        """Whether shape and dtype agree."""
        return self.actual == self.expected

    @property
    def bitwise(self) -> bool:
        """Whether the output is bit for bit the expected one."""
        return self.same_shape_and_dtype and self.differing == 0

    def describe(self) -> str:
        """One line: what differs, for failure messages and the report."""
        if not self.same_shape_and_dtype:
            return f"got {self.actual}, expected {self.expected}"
        if self.differing == 0:
            return "bit for bit"
        text = f"{self.differing} of {self.size} elements differ"
        if self.nan_mismatches:
            text += f" ({self.nan_mismatches} NaN on one side only)"
        if self.differing > self.nan_mismatches:
            text += f", up to {self.max_ulp} ULP"
        return text


def _signature(array: np.ndarray) -> str:
    return f"{array.dtype}{array.shape}"


def compare(actual: np.ndarray, expected: np.ndarray) -> Comparison:
    """Compare one output with the expected one, bit for bit.

    Parameters
    ----------
    actual : numpy.ndarray
        What the code under test returned.
    expected : numpy.ndarray
        What Julia returned.

    Returns
    -------
    Comparison
        Shapes and dtypes, the largest distance and how many elements differ.
    """
    actual = np.asarray(actual)
    signature = (_signature(actual), _signature(expected))
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Comparison(*signature, 0, expected.size, 0, expected.size)
    if expected.dtype.kind == "f":
        distance = ulp_distance(actual, expected)
        nan_mismatches = int(np.count_nonzero(np.isnan(actual) ^ np.isnan(expected)))
        finite = distance[distance != np.iinfo(np.int64).max]
        return Comparison(
            *signature,
            int(finite.max(initial=0)),
            int(np.count_nonzero(distance)),
            nan_mismatches,
            expected.size,
        )
    if expected.dtype.kind in "iu":
        difference = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
        return Comparison(
            *signature,
            int(difference.max(initial=0)),
            int(np.count_nonzero(difference)),
            0,
            expected.size,
        )
    differing = int(np.count_nonzero(actual != expected))
    return Comparison(*signature, int(differing > 0), differing, 0, expected.size)


def compare_outputs(
    actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]
) -> dict[str, Comparison | None]:
    """Compare every expected output by name.

    Parameters
    ----------
    actual, expected : Mapping[str, numpy.ndarray]
        Outputs by name (``y``, ``cos_cached``, ``mask``, ...).

    Returns
    -------
    dict[str, Comparison | None]
        One entry per expected output; ``None`` where ``actual`` lacks it.
    """
    return {
        name: compare(actual[name], value) if name in actual else None
        for name, value in expected.items()
    }


def describe_failures(comparisons: Mapping[str, Comparison | None]) -> str:
    """The outputs that are not bit for bit, one line each ("" if none).

    Parameters
    ----------
    comparisons : Mapping[str, Comparison | None]
        As returned by :func:`compare_outputs`.

    Returns
    -------
    str
        ``name: what differs`` lines, e.g. ``y: 3 of 480 elements differ,
        up to 1 ULP``.
    """
    return "\n".join(
        f"{name}: {'missing' if result is None else result.describe()}"
        for name, result in comparisons.items()
        if result is None or not result.bitwise
    )
