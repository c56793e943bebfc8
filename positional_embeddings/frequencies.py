"""``compute_frequencies``: the angle table shared by RoPE and AbsolutePE."""

from __future__ import annotations

import numpy as np

from ._checks import as_real, as_size, holdable
from ._kernels import inverse_frequencies

__all__ = ["compute_frequencies", "frequency_bands"]


def frequency_bands(dim: int, base: float) -> np.ndarray:
    """``1 / base^((2i)/dim)`` for i = 0 .. ceil(dim/2)-1, with Julia's own ``^``.

    ``dim`` and ``base`` must already be checked (an int >= 0, a float).
    Raises ``ValueError`` where Julia's ``^`` throws ``DomainError``: a
    negative base with a fractional exponent (any dim above 2).
    """
    count = (dim + 1) // 2
    holdable((count,), np.float64, "the frequencies")
    _check_base(count, base)
    theta = np.empty(count)
    inverse_frequencies(dim, base, theta)
    return theta


def _check_base(count: int, base: float) -> None:
    """Refuse a negative ``base`` for ``count`` frequencies where Julia's
    ``^`` throws ``DomainError`` (a fractional exponent: ``count`` above 1)."""
    if base < 0 and count > 1:
        raise ValueError(
            f"base must not be negative, got {base}: base^((2i)/dim) would be "
            "complex (Julia raises DomainError)"
        )


def compute_frequencies(dim: int, seq_len: int, base: float = 10_000) -> np.ndarray:
    """Angles ``theta_i * p`` of rotary and sinusoidal position embeddings.

    ``theta_i = 1 / base^((2i)/dim)`` for i = 0, 1, ... with 2i <= dim - 1, and
    positions p = 0 .. seq_len-1; all in float64, as Julia computes them.

    Parameters
    ----------
    dim : int
        Feature dimension (>= 0).  Gives ``ceil(dim/2)`` frequency rows.
    seq_len : int
        Number of positions (>= 0).
    base : real, default 10_000
        Base of the geometric progression, promoted to float64.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(ceil(dim/2), seq_len)``; entry ``[i, p] = theta_i * p``.

    Raises
    ------
    TypeError
        Non-integer ``dim``/``seq_len``, non-real ``base``.
    ValueError
        Negative sizes; a negative ``base`` with ``dim > 2``.

    Notes
    -----
    Julia: ``PositionalEmbeddings.compute_frequencies(dim, seq_len, base)``.
    Julia's docstring says the result is ``(dim, seq_len)``; its code (and
    this function) gives ``ceil(dim/2)`` rows.  ``base^x`` is Julia's own
    float64 power function, reproduced bit for bit, not the C library's.

    Examples
    --------
    >>> compute_frequencies(4, 3)
    array([[0.  , 1.  , 2.  ],
           [0.  , 0.01, 0.02]])
    >>> compute_frequencies(5, 10).shape
    (3, 10)
    """
    dim = as_size(dim, "dim")
    seq_len = as_size(seq_len, "seq_len")
    base = as_real(base, "base")
    rows = (dim + 1) // 2
    holdable((rows, seq_len), np.float64, "compute_frequencies' result")
    if not seq_len:  # no positions: the bands' check alone, not the bands
        _check_base(rows, base)
        return np.empty((rows, 0))
    theta = frequency_bands(dim, base)
    if not theta.size:  # no rows, whatever seq_len: no positions to make
        return np.empty((0, seq_len))
    with np.errstate(invalid="ignore", over="ignore"):  # IEEE results, silent as in Julia
        return theta[:, np.newaxis] * np.arange(seq_len, dtype=np.float64)
