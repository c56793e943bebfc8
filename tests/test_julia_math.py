"""Julia's own scalar math, value by value against Julia 1.10.5's recorded results.

``parity/fixtures/scalars.npz`` holds Julia's ``sin``/``cos`` for Float32 and
Float64 arguments (tiny to 1e12, special values, exact RoPE angles) and its
Float64 ``^`` on the base/exponent pairs ``compute_frequencies`` meets.  The
C library disagrees with Julia on thousands of them; these kernels must not
disagree on any.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pytest

from positional_embeddings._julia_math import (
    _by_quadrant,
    fma,
    moderate_f32,
    pow_f64,
    sincos_f32,
    sincos_f32_moderate,
    sincos_f64,
)

from comparisons import assert_bitwise_equal

SCALARS = Path(__file__).resolve().parents[1] / "parity" / "fixtures" / "scalars.npz"


@pytest.fixture(scope="module")
def recorded():
    with np.load(SCALARS) as data:
        return {name: data[name] for name in data.files}


@numba.njit
def _map_sincos_f32(x, sin_out, cos_out):
    for i in range(x.size):
        sin_out[i], cos_out[i] = sincos_f32(x[i])


@numba.njit
def _map_sincos_f32_moderate(x, sin_out, cos_out, covered):
    for i in range(x.size):
        sin_out[i], cos_out[i] = sincos_f32_moderate(x[i])
        covered[i] = moderate_f32(x[i])


@numba.njit
def _map_sincos_f64(x, sin_out, cos_out):
    for i in range(x.size):
        sin_out[i], cos_out[i] = sincos_f64(x[i])


@numba.njit
def _map_pow(base, exponent, out):
    for i in range(base.size):
        out[i] = pow_f64(base[i], exponent[i])


@numba.njit
def _fma(a, b, c):
    return fma(a, b, c)


@pytest.mark.parametrize("precision", ["32", "64"])
def test_sin_and_cos_match_julia_bit_for_bit(recorded, precision):
    x = recorded[f"x{precision}"]
    sin_out, cos_out = np.empty_like(x), np.empty_like(x)
    (_map_sincos_f32 if precision == "32" else _map_sincos_f64)(x, sin_out, cos_out)
    assert x.size > 100_000
    assert_bitwise_equal(sin_out, recorded[f"sin{precision}"])
    assert_bitwise_equal(cos_out, recorded[f"cos{precision}"])


def test_branch_free_sin_and_cos_match_julia_on_the_angles_they_cover(recorded):
    """``sincos_f32_moderate`` (the form RoPE's float32 tables vectorise) on
    every recorded Float32 argument below Float32(pi*2^27); the others are
    the recorded ones that Julia reduces with Payne-Hanek, Inf and NaN."""
    x = recorded["x32"]
    sin_out, cos_out = np.empty_like(x), np.empty_like(x)
    covered = np.empty(x.shape, bool)
    _map_sincos_f32_moderate(x, sin_out, cos_out, covered)
    np.testing.assert_array_equal(covered, np.abs(x) < np.float32(np.pi * 2.0**27))
    assert covered.sum() > 100_000 and (~covered).sum() > 100
    assert_bitwise_equal(sin_out[covered], recorded["sin32"][covered])
    assert_bitwise_equal(cos_out[covered], recorded["cos32"][covered])


@pytest.mark.parametrize("kind", [np.float32, np.float64])
def test_quadrant_selection_for_every_quadrant_and_sign(kind):
    """Julia's ``sin``/``cos`` pick ``(s, c)``, ``(c, -s)``, ``(-s, -c)`` or
    ``(-c, s)`` by ``n & 3``, for negative quadrant counts too (negative
    angles), signed zeros included."""
    choices = {0: lambda s, c: (s, c), 1: lambda s, c: (c, -s), 2: lambda s, c: (-s, -c)}
    for n in range(-9, 9):
        for s, c in ((0.25, -0.75), (-0.0, 0.0), (0.0, -0.0)):
            s, c = kind(s), kind(c)
            expected = choices.get(n & 3, lambda s, c: (-c, s))(s, c)
            got = _by_quadrant(n, s, c)
            assert_bitwise_equal(np.array(got, kind), np.array(expected, kind))


def test_pow_matches_julia_bit_for_bit(recorded):
    out = np.empty_like(recorded["pow"])
    _map_pow(recorded["pow_base"], recorded["pow_exp"], out)
    assert out.size > 600_000
    assert_bitwise_equal(out, recorded["pow"])


def test_the_c_library_would_not_do():
    """The recorded values are worth testing: libm differs from Julia on some of them."""
    with np.load(SCALARS) as data:
        libm = data["pow_base"] ** data["pow_exp"]
        assert np.count_nonzero(libm != data["pow"]) > 1000


def test_fma_is_fused():
    assert _fma(1 + 2.0**-30, 1 - 2.0**-30, -1.0) == -(2.0**-60)


@pytest.mark.parametrize(
    "base,exponent,expected",
    [
        (2.0, 0.5, np.sqrt(2.0)),
        (10_000.0, 0.0, 1.0),
        (1.0, np.nan, 1.0),
        (0.0, 0.5, 0.0),
        (0.0, -0.5, np.inf),
        (np.inf, 0.5, np.inf),
        (np.inf, -0.5, 0.0),
        (-2.0, 0.5, np.nan),
        (2.0, 3.0, 8.0),
        (2.0, -2.0, 0.25),
    ],
)
def test_pow_special_values(base, exponent, expected):
    out = np.empty(1)
    _map_pow(np.array([base]), np.array([exponent]), out)
    np.testing.assert_equal(out[0], expected)


def test_infinities_give_nan_where_julia_throws():
    for function, dtype in ((_map_sincos_f32, np.float32), (_map_sincos_f64, np.float64)):
        x = np.array([np.inf, -np.inf, np.nan], dtype=dtype)
        s, c = np.empty_like(x), np.empty_like(x)
        function(x, s, c)
        assert np.isnan(s).all() and np.isnan(c).all()
