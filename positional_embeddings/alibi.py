"""ALiBi: attention with linear biases (Press et al., 2022)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._checks import MAX_QUERY_OFFSET, as_flag, as_float_dtype, as_size, holdable
from ._kernels import alibi_bias as _alibi_bias_kernel

__all__ = ["alibi_bias", "alibi_slopes"]


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The per-head slopes of ALiBi, by the paper's rule.

    For a power of two n: ``2^(-8/n), 2^(-16/n), ..., 2^(-8)`` (start and
    ratio ``2^(-8/n)``), computed as the paper's code computes them,
    ``start * start**i`` in float64: from 16 heads on a few ULP from
    ``2^(-8k/n)``, tens of ULP from 128 (``alibi_slopes(16)[-1]`` is
    ``0.003906250000000004``, not ``2**-8``).  Otherwise the slopes of the nearest lower power of
    two, followed by every other slope of the next power of two, as many as
    are missing.

    Parameters
    ----------
    n_heads : int
        Number of attention heads (>= 1).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_heads,)``.

    Examples
    --------
    >>> alibi_slopes(8)
    array([0.5       , 0.25      , 0.125     , 0.0625    , 0.03125   ,
           0.015625  , 0.0078125 , 0.00390625])
    >>> alibi_slopes(3)  # 2 slopes for 2 heads, then the first of 4 heads' every other
    array([0.0625    , 0.00390625, 0.25      ])
    """
    n_heads = as_size(n_heads, "n_heads", minimum=1)
    holdable((n_heads,), np.float64, "the slopes")
    closest = 1 << (n_heads.bit_length() - 1)  # the largest power of two up to n_heads
    slopes = itertools.chain(
        _powers(closest, closest, 1), _powers(2 * closest, n_heads - closest, 2)
    )
    return np.fromiter(slopes, np.float64, n_heads)


def _powers(heads: int, count: int, step: int) -> Iterator[float]:
    """The first ``count`` of every ``step``-th slope of ``heads`` heads (a
    power of two), as the paper's code computes them, one at a time."""
    start = 2.0 ** (-(2.0 ** -(math.log2(heads) - 3)))
    return (start * start**i for i in range(0, step * count, step))


def alibi_bias(
    n_heads: int,
    length_q: int,
    length_k: int | None = None,
    *,
    causal: bool = False,
    offset: int = 0,
    dtype: Any = np.float32,
) -> np.ndarray:
    """ALiBi's attention bias ``-slope_h * |q - k|`` in Julia's (key, query, head) layout.

    Parameters
    ----------
    n_heads : int
        Number of heads (>= 1); slopes from :func:`alibi_slopes`.
    length_q : int
        Number of queries (>= 0).
    length_k : int, optional
        Number of keys (>= 0); defaults to ``length_q``.
    causal : bool, default False
        Keys after the query get ``-inf`` (masked) instead of a penalty.
    offset : int, default 0
        Beyond Julia, for cached decoding: the position of the first query
        (``0 <= offset <= 2**62``; keys are at positions ``0 .. length_k -
        1``).  A step's query after ``L`` cached keys:
        ``alibi_bias(n_heads, 1, L + 1, offset=L, causal=True)``, the last
        column of the whole sequence's bias.  By default query ``q`` is at
        position ``q`` (PyTorch's ``scaled_dot_product_attention`` aligns
        a causal mask so too).
    dtype : np.float32 or np.float64, default np.float32
        The slopes are rounded to it first and multiplied in it (as a float32
        torch implementation does).

    Returns
    -------
    numpy.ndarray
        Shape ``(length_k, length_q, n_heads)``: the layout of the package's
        attention scores ``kᵀq`` (keys on the first axis, softmax over it).
        For scores of shape (length_k, length_q, heads*batch), add
        ``np.tile(bias, (1, 1, batch))`` (heads vary fastest, as Julia's
        ``split_heads`` lays them out).

    Examples
    --------
    >>> alibi_bias(2, 3)[:, :, 0]
    array([[-0.    , -0.0625, -0.125 ],
           [-0.0625, -0.    , -0.0625],
           [-0.125 , -0.0625, -0.    ]], dtype=float32)
    """
    n_heads = as_size(n_heads, "n_heads", minimum=1)
    length_q = as_size(length_q, "length_q")
    length_k = length_q if length_k is None else as_size(length_k, "length_k")
    causal = as_flag(causal, "causal")
    offset = as_size(offset, "offset", maximum=MAX_QUERY_OFFSET)
    dtype = as_float_dtype(dtype, "dtype", float16=False, julia=False)
    holdable((length_k, length_q, n_heads), dtype, "the bias")
    bias = np.empty((length_k, length_q, n_heads), dtype=dtype)
    if not bias.size:
        return bias
    _alibi_bias_kernel(alibi_slopes(n_heads).astype(dtype), causal, offset, bias)
    return bias
