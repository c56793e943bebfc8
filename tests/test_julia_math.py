"""Julia's own scalar math, value by value against Julia 1.10.5's recorded results.

``parity/fixtures/scalars.npz`` holds Julia's ``sin``/``cos`` for Float32 and
Float64 arguments (tiny to 1e12, special values, exact RoPE angles) and its
Float64 ``^`` on the base/exponent pairs ``compute_frequencies`` meets.  The
C library disagrees with Julia on thousands of them; these kernels must not
disagree on any.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numba
import numpy as np
import pytest

from positional_embeddings._julia_math import (
    _by_quadrant,
    _cos_kernel_f64,
    _high_word,
    _rem_pio2_f64_moderate,
    _sin_kernel_f64,
    fma,
    moderate_f32,
    moderate_f64,
    pow_f64,
    sincos_f32,
    sincos_f32_moderate,
    sincos_f64,
    sincos_f64_moderate,
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
def _map_sincos_f64_moderate(x, sin_out, cos_out, covered):
    for i in range(x.size):
        sin_out[i], cos_out[i] = sincos_f64_moderate(x[i])
        covered[i] = moderate_f64(x[i])


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


def _below_f32_bound(x: np.ndarray) -> np.ndarray:
    """|x| < Float32(pi*2^27): where Julia's Float32 reduction takes two constants."""
    return np.abs(x) < np.float32(np.pi * 2.0**27)


def _high_word_of(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint64) >> np.uint64(32)) & np.uint64(0x7FFFFFFF)


def _below_f64_bound(x: np.ndarray) -> np.ndarray:
    """|x|'s high word below that of 2^20*pi/2: where Julia's Float64 reduction
    is Cody-Waite's (NaN's high word is above it)."""
    return _high_word_of(x) < 0x413921FB


@pytest.mark.parametrize(
    "precision,branch_free,bound",
    [
        ("32", _map_sincos_f32_moderate, _below_f32_bound),
        ("64", _map_sincos_f64_moderate, _below_f64_bound),
    ],
)
def test_branch_free_sin_and_cos_match_julia_on_the_angles_they_cover(
    recorded, precision, branch_free, bound
):
    """``sincos_f32_moderate`` and ``sincos_f64_moderate`` (the forms the
    tables vectorise) on every recorded argument below Float32(pi*2^27)
    and 2^20*pi/2; the others are the recorded ones that Julia reduces with
    Payne-Hanek, Inf and NaN."""
    x = recorded[f"x{precision}"]
    sin_out, cos_out = np.empty_like(x), np.empty_like(x)
    covered = np.empty(x.shape, bool)
    branch_free(x, sin_out, cos_out, covered)
    np.testing.assert_array_equal(covered, bound(x))
    assert covered.sum() > 100_000 and (~covered).sum() > 100
    assert_bitwise_equal(sin_out[covered], recorded[f"sin{precision}"][covered])
    assert_bitwise_equal(cos_out[covered], recorded[f"cos{precision}"][covered])


_PIO2 = (
    (1.57079632673412561417e00, 6.07710050650619224932e-11),
    (6.07710050630396597660e-11, 2.02226624879595063154e-21),
    (2.02226624871116645580e-21, 8.47842766036889956997e-32),
)
"""Julia's ``pio2_1, pio2_1t`` to ``pio2_3, pio2_3t``."""


@numba.njit
def _julia_cody_waite_2c(x, fn, n):
    pio2_1, pio2_1t = _PIO2[0]
    z = fma(-fn, pio2_1, x)
    y1 = fma(-fn, pio2_1t, z)
    return n, y1, fma(-fn, pio2_1t, z - y1), 0


@numba.njit
def _julia_cody_waite_ext(x, xhp):
    (pio2_1, pio2_1t), (pio2_2, pio2_2t), (pio2_3, pio2_3t) = _PIO2
    fn = np.rint(x * (2 / np.pi))
    r = fma(-fn, pio2_1, x)
    w = fn * pio2_1t
    j = xhp >> 20
    y1 = r - w
    i = j - ((_high_word(y1) >> 20) & 0x7FF)
    constants = 1
    for (part, tail), needed in (((pio2_2, pio2_2t), 16), ((pio2_3, pio2_3t), 49)):
        if i <= needed:  # Julia: "if i>16 # 2nd iteration needed", then "if i>49"
            break
        t = r
        w = fn * part
        r = t - w
        w = fma(fn, tail, -((t - r) - w))
        y1 = r - w
        i = j - ((_high_word(y1) >> 20) & 0x7FF)
        constants += 1
    return np.int64(fn), y1, (r - y1) - w, constants


@numba.njit
def _julia_rem_pio2(x):
    """Julia 1.10.5's ``rem_pio2_kernel(::Float64)`` below 2^20*pi/2, branch
    by branch as ``base/special/rem_pio2.jl`` writes it: the oracle for the
    branch-free form.  Also returns how many two-part constants the
    extended scheme took (0: the two-constant scheme)."""
    xhp = _high_word(x) & 0x7FFFFFFF
    if xhp <= 0x400F6A7A:
        if (xhp & 0xFFFFF) == 0x921FB:
            return _julia_cody_waite_ext(x, xhp)
        if xhp <= 0x4002D97C:
            return _julia_cody_waite_2c(x, 1.0, 1) if x > 0.0 else _julia_cody_waite_2c(x, -1.0, -1)
        return _julia_cody_waite_2c(x, 2.0, 2) if x > 0.0 else _julia_cody_waite_2c(x, -2.0, -2)
    if xhp <= 0x401C463B:
        if xhp <= 0x4015FDBC:
            if xhp == 0x4012D97C:
                return _julia_cody_waite_ext(x, xhp)
            return _julia_cody_waite_2c(x, 3.0, 3) if x > 0.0 else _julia_cody_waite_2c(x, -3.0, -3)
        if xhp == 0x401921FB:
            return _julia_cody_waite_ext(x, xhp)
        return _julia_cody_waite_2c(x, 4.0, 4) if x > 0.0 else _julia_cody_waite_2c(x, -4.0, -4)
    return _julia_cody_waite_ext(x, xhp)


@numba.njit
def _compare_reductions(x, julia, ours, constants, sin_cos, expected_sin_cos):
    for i in range(x.size):
        n, hi, lo, constants[i] = _julia_rem_pio2(x[i])
        julia[i, 0], julia[i, 1], julia[i, 2] = n, hi, lo
        ours[i, 0], ours[i, 1], ours[i, 2] = _rem_pio2_f64_moderate(x[i])
        s, c = _by_quadrant(n, _sin_kernel_f64(hi, lo), _cos_kernel_f64(hi, lo))
        expected_sin_cos[i, 0], expected_sin_cos[i, 1] = s, c
        sin_cos[i, 0], sin_cos[i, 1] = sincos_f64(x[i])


_PI = Fraction(
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803"
)


def _hard_reductions() -> np.ndarray:
    """Float64 angles below 2^20*pi/2 that take every branch of Julia's
    reduction: the doubles nearest k*pi/2 (the extended scheme's third
    constant) and those up to 24 steps from them (across the bounds of the
    second and third constants), every high word that Julia compares against
    with random low words, and random angles of every size."""
    rng = np.random.default_rng(20)
    nearest = np.array([float(k * _PI / 2) for k in range(1, 1 << 20, 211)])
    steps = np.arange(-24, 25)  # from 2 to 53 bits of cancellation, by the angle's size
    near = (nearest.view(np.int64)[:, None] + steps).view(np.float64).ravel()
    words = [0x3FE921FB, 0x3FF921FB, 0x400921FB, 0x4012D97C, 0x401921FB, 0x4002D97C, 0x4002D97D]
    words += [0x400F6A7A, 0x400F6A7B, 0x4015FDBC, 0x4015FDBD, 0x401C463B, 0x401C463C, 0x413921FA]
    low = rng.integers(0, 1 << 32, (len(words), 500), dtype=np.uint64)
    high = np.array(words, np.uint64)[:, None] << np.uint64(32)
    by_word = (high | low).view(np.float64).ravel()
    sizes = np.exp(rng.uniform(np.log(1e-3), np.log(2.0**20 * np.pi / 2), 20_000))
    x = np.concatenate([near, by_word, sizes])
    x = np.concatenate([x, -x])
    return x[(_high_word_of(x) < 0x413921FB)]


def test_branch_free_reduction_takes_julias_every_branch_bit_for_bit():
    """``_rem_pio2_f64_moderate`` computes both of Julia's schemes and every
    step of the extended one and selects; on angles that take each of
    Julia's branches (counted), it gives what those branches give, and
    ``sincos_f64`` gives the sin and cos of that reduction."""
    x = _hard_reductions()
    julia, ours = np.empty((x.size, 3)), np.empty((x.size, 3))
    constants = np.empty(x.size, np.int64)
    sin_cos, expected = np.empty((x.size, 2)), np.empty((x.size, 2))
    _compare_reductions(x, julia, ours, constants, sin_cos, expected)
    assert_bitwise_equal(ours, julia)
    reduced = np.abs(x) >= np.pi / 4
    assert_bitwise_equal(sin_cos[reduced], expected[reduced])
    counts = np.bincount(constants[reduced], minlength=4)
    assert counts.min() > 1000, counts
    words = _high_word_of(x[reduced])
    for word in (0x3FF921FB, 0x400921FB, 0x4012D97C, 0x401921FB):
        assert np.count_nonzero(words == word) > 500


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
