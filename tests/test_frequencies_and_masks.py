"""compute_frequencies and the masks against the slow reference and upstream's figures."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from positional_embeddings import (
    RoPE,
    compute_frequencies,
    create_causal_mask,
    create_padding_mask,
)

import reference
from comparisons import peak_memory, ulp_distance


@pytest.mark.parametrize(
    "dim,seq_len,base",
    [
        (16, 10, 10_000),
        (15, 7, 10_000),
        (1, 3, 10_000),
        (128, 64, 500_000),
        (7, 5, 10_000.5),
        (0, 4, 10),
    ],
)
def test_frequencies_match_reference(dim, seq_len, base):
    """Within 4 ULP: the reference uses the C library's pow, which differs from
    Julia's by up to an ULP before the division and product round again.
    Bit-exactness against Julia is the parity replay's job."""
    actual = compute_frequencies(dim, seq_len, base)
    expected = reference.compute_frequencies(dim, seq_len, base)
    assert actual.shape == ((dim + 1) // 2, seq_len)
    assert actual.dtype == np.float64
    assert ulp_distance(actual, expected).max(initial=0) <= 4


def test_frequencies_edges():
    assert compute_frequencies(8, 0).shape == (4, 0)
    assert compute_frequencies(0, 5).shape == (0, 5)
    np.testing.assert_array_equal(compute_frequencies(2, 3), [[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="dim must be >= 0"):
        compute_frequencies(-1, 3)
    with pytest.raises(TypeError, match="seq_len must be an integer"):
        compute_frequencies(4, 3.0)


def test_frequencies_of_no_positions_compute_no_bands():
    """``seq_len`` 0: an empty result of ``ceil(dim/2)`` rows, without the
    bands (a vector of ``dim/2`` values); a negative base is refused still,
    as Julia's ``^`` throws before it multiplies by the positions."""
    empty, peak = peak_memory(lambda: compute_frequencies(2**26, 0))
    assert empty.shape == (2**25, 0) and empty.dtype == np.float64
    assert peak < 2**20
    with pytest.raises(ValueError, match="base must not be negative"):
        compute_frequencies(8, 0, -3)
    assert compute_frequencies(2, 0, -3).shape == (1, 0)


def test_frequencies_of_extreme_bases_are_ieee_and_silent():
    """base 0 gives an infinite band (1/0^x), whose position 0 is 0*Inf = NaN
    in Julia as in IEEE arithmetic, without a warning; so does an infinite base."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zero = compute_frequencies(4, 3, base=0.0)
        infinite = compute_frequencies(4, 3, base=np.inf)
    np.testing.assert_array_equal(zero, [[0.0, 1.0, 2.0], [np.nan, np.inf, np.inf]])
    np.testing.assert_array_equal(infinite, [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]])


def test_fraction_bases_and_scales_convert_as_julia_s_rationals():
    """Julia converts a ``Rational{Int}`` to Float64 as numerator over
    denominator, each rounded first: (2**54 + 3) // 3 is 6004799503160663.0
    there, where a correctly rounded conversion gives 6004799503160662.0.
    Beyond Julia's ``Int`` (where Julia's ``Rational{BigInt}`` would compute
    in BigFloat) it is rounded once."""
    julia = float(2**54 + 3) / 3.0
    assert julia == 6004799503160663.0 != float(Fraction(2**54 + 3, 3))
    frequencies = compute_frequencies(1000, 2, Fraction(2**54 + 3, 3))
    assert np.array_equal(frequencies, compute_frequencies(1000, 2, julia))
    assert not np.array_equal(
        frequencies, compute_frequencies(1000, 2, float(Fraction(2**54 + 3, 3)))
    )
    wide = Fraction(2**70 + 2**15 + 1, 3)  # numerator beyond Int64: rounded once
    assert float(wide) != float(wide.numerator) / 3.0
    once = compute_frequencies(1000, 3, wide)
    assert np.array_equal(once, compute_frequencies(1000, 3, float(wide)))
    assert not np.array_equal(once, compute_frequencies(1000, 3, float(wide.numerator) / 3.0))
    scale = Fraction(2**54 + 3, 3)
    tables = RoPE(4, 3, scale=scale, T=np.float64).cos_cached
    assert np.array_equal(tables, RoPE(4, 3, scale=julia, T=np.float64).cos_cached)
    assert not np.array_equal(tables, RoPE(4, 3, scale=float(scale), T=np.float64).cos_cached)
    assert (
        RoPE(4, 3, scale=Fraction(1, 3)).cos_cached.tobytes()
        == RoPE(4, 3, scale=1 / 3).cos_cached.tobytes()
    )


def test_upstream_causal_mask():
    expected = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1]], dtype=bool).reshape(3, 3, 1)
    np.testing.assert_array_equal(create_causal_mask(3), expected)


@pytest.mark.parametrize("seq_len", [1, 2, 17, 256, 257])  # positions fitting 8 bits, and not
def test_causal_mask_matches_reference(seq_len):
    mask = create_causal_mask(seq_len)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, reference.causal_mask(seq_len))


@pytest.mark.parametrize(
    "seq_len,error,match",
    [
        (0, ValueError, r"seq_len must be >= 1, got 0 \(Julia raises ArgumentError\)"),
        (-1, ValueError, r"seq_len must be >= 1, got -1 \(Julia raises ArgumentError\)"),
        (2.0, TypeError, "seq_len must be an integer"),
        (True, TypeError, "seq_len must be an integer, got bool"),
    ],
)
def test_causal_mask_errors(seq_len, error, match):
    with pytest.raises(error, match=match):
        create_causal_mask(seq_len)


class _BoolScalar:
    """A 0-d bool of another array library, as ``torch.tensor(True)`` is:
    it converts to an index (``__index__``) and names its dtype."""

    dtype = "torch.bool"

    def __index__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "tensor(True)"


@pytest.mark.parametrize("value", [_BoolScalar(), np.array(True)])
def test_sizes_of_a_bool_dtype_are_refused(value):
    with pytest.raises(TypeError, match="seq_len must be an integer, got bool"):
        create_causal_mask(value)
    with pytest.raises(TypeError, match="max_len must be an integer, got bool"):
        create_padding_mask([1], value)


def test_upstream_padding_mask():
    """Julia's own test: lengths [2, 3, 1], max_len 4 gives size (1, 4, 3)."""
    expected = np.array([[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1]], dtype=bool).T.reshape(1, 4, 3)
    result = create_padding_mask([2, 3, 1], 4)
    assert result.shape == (1, 4, 3)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize(
    "lengths,max_len",
    [
        ([0, 5], 5),
        ([3, 3], 3),
        ([-1, 7, 2], 4),
        (np.array([1, 2], dtype=np.uint8), 3),
        ((4,), 1),
        # positions in their smallest type, against lengths of any type and size
        ([-(2**63), 255, 256, 2**63 - 1], 257),
        (np.array([0, 2**64 - 1, 300], dtype=np.uint64), 65537),
        (np.array([-1, 127], dtype=np.int8), 256),
    ],
)
def test_padding_mask_matches_reference(lengths, max_len):
    mask = create_padding_mask(lengths, max_len)
    np.testing.assert_array_equal(mask, reference.padding_mask(list(lengths), max_len))


@pytest.mark.parametrize(
    "lengths,max_len,error,match",
    [
        ([], 4, ValueError, r"lengths must be non-empty, got none \(Julia 1.10 raises Divide"),
        ([1, 2], 0, ValueError, r"max_len must be >= 1, got 0 \(Julia 1.10 raises DivideError"),
        ([1, 2], -1, ValueError, "max_len must be >= 1, got -1"),
        ([1.0], 0, ValueError, "max_len must be >= 1"),  # max_len is checked first
        ([1.0, 2.0], 3, TypeError, "integers"),
        ([True, False], 3, TypeError, "integers"),
        ([[1, 2]], 3, ValueError, "1-D"),
        ([1, 2], 3.0, TypeError, "max_len must be an integer"),
        (["a"], 3, TypeError, "integers"),
    ],
)
def test_padding_mask_errors(lengths, max_len, error, match):
    with pytest.raises(error, match=match):
        create_padding_mask(lengths, max_len)


def test_masks_combine_by_broadcasting():
    combined = create_causal_mask(5) | create_padding_mask([3, 4], 5)
    assert combined.shape == (5, 5, 2)
    causal, padding = reference.causal_mask(5), reference.padding_mask([3, 4], 5)
    for i, j, b in np.ndindex(5, 5, 2):
        assert combined[i, j, b] == (causal[i, j, 0] or padding[0, j, b])
