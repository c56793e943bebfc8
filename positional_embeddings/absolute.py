"""Sinusoidal absolute position embeddings (AbsolutePE), as in PositionalEmbeddings.jl."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import as_array, as_real, as_size, check_finite_angles, output_for, promote
from ._kernels import absolute_forward, absolute_table
from ._views import run_forward
from .frequencies import frequency_bands

__all__ = ["AbsolutePE"]

_TABLE_DTYPE = np.dtype(np.float32)


class AbsolutePE:
    """Sinusoidal position embeddings ("Attention Is All You Need") on (seq, features, batch).

    Parameters
    ----------
    embedding_size : int
        Feature size d_model: even, or 1 (>= 0).
    max_length : int
        Longest sequence supported (>= 0).
    base : real, default 10_000
        Base of the frequency progression.

    Attributes
    ----------
    embedding_size, max_length : int
    embeddings : numpy.ndarray
        float32, shape ``(embedding_size, max_length)``, read-only.  Row ``2i``
        is ``sin(theta_i * p)``, row ``2i+1`` is ``cos(theta_i * p)`` (sin and
        cos in float64, rounded once to float32).

    Raises
    ------
    TypeError
        Non-integer sizes, non-real ``base``.
    ValueError
        Negative sizes; an odd ``embedding_size`` above 1 (Julia raises
        ``DimensionMismatch``: there is one cos row fewer than sin rows); a
        negative ``base`` with ``embedding_size > 2``; angles that overflow.

    Notes
    -----
    Julia: ``AbsolutePE(embedding_size, max_length; base=10_000)``.  Size 1
    works in Julia (a single sin row) and here.  Julia's ``sin``/``cos`` for
    Float64 are reproduced bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> pe = AbsolutePE(512, 1000)
    >>> pe.embeddings.shape
    (512, 1000)
    >>> x = np.zeros((100, 512, 32), dtype=np.float32)  # (seq, features, batch)
    >>> y = pe(x)
    >>> y.shape, bool((y[:, :, 0] == pe.embeddings[:, :100].T).all())
    ((100, 512, 32), True)
    """

    __slots__ = ("embedding_size", "embeddings", "max_length")

    embedding_size: int
    max_length: int
    embeddings: np.ndarray

    def __init__(self, embedding_size: int, max_length: int, base: float = 10_000) -> None:
        embedding_size = as_size(embedding_size, "embedding_size")
        max_length = as_size(max_length, "max_length")
        base = as_real(base, "base")
        if embedding_size % 2 and embedding_size > 1:
            raise ValueError(
                f"embedding_size must be even (or 1), got {embedding_size}: "
                "Julia's AbsolutePE raises DimensionMismatch (one cos row fewer "
                "than sin rows)"
            )
        theta = frequency_bands(embedding_size, base)
        with np.errstate(over="ignore", invalid="ignore"):
            check_finite_angles(theta * max(max_length - 1, 0), "sin")
        embeddings = np.empty((embedding_size, max_length), dtype=_TABLE_DTYPE)
        absolute_table(theta, embeddings)
        embeddings.flags.writeable = False
        self.embedding_size = embedding_size
        self.max_length = max_length
        self.embeddings = embeddings

    def __call__(self, x: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Add the embeddings to ``x``: Julia's ``pe(x)``.

        Parameters
        ----------
        x : array_like
            Shape ``(seq_len, embedding_size, ...)`` with 3 or more dims,
            seq_len up to ``max_length``; bool, integer or float16/32/64.  Not
            modified.
        out : numpy.ndarray, optional
            Where to write the result: shape of ``x``, the promoted dtype; may
            be ``x`` itself but not overlap it otherwise.

        Returns
        -------
        numpy.ndarray
            ``x + embeddings[:, :seq_len].T`` broadcast over the axes after the
            second; dtype float64 for float64 input, else float32 (Julia's
            ``promote_type(eltype(x), Float32)``); in ``x``'s memory order.

        Raises
        ------
        TypeError
            Unsupported dtype of ``x``; ``out`` of the wrong type or dtype.
        ValueError
            Fewer than 3 dims; "Channel dimension must match embedding size";
            "Sequence length exceeds maximum length"; a bad ``out``.
        """
        x = as_array(x, "x", 3)
        seq_len, channels = x.shape[0], x.shape[1]
        if channels != self.embedding_size:
            raise ValueError(
                "Channel dimension must match embedding size: expected "
                f"{self.embedding_size}, got {channels}"
            )
        if seq_len > self.max_length:
            raise ValueError(
                "Sequence length exceeds maximum length: x has seq_len "
                f"{seq_len}, max_length is {self.max_length}"
            )
        out = output_for(x, promote(x.dtype, _TABLE_DTYPE), out)
        return run_forward(absolute_forward, x, out, self.embeddings)

    def __repr__(self) -> str:
        return f"AbsolutePE(embedding_size={self.embedding_size}, max_length={self.max_length})"
