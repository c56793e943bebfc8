"""Conversion between the two RoPE pairings, for activations and projection weights.

Julia's RoPE (and GPT-NeoX, Hugging Face LLaMA) pairs channel ``h`` with
``h + head_size/2`` ("half split"); RoFormer, GPT-J and Meta's LLaMA
checkpoints pair ``2i`` with ``2i + 1`` ("interleaved").  Both rotate the same
pairs by the same angles once the channels are reordered, so::

    RoPE(H, L, interleaved=True)(x)
        == half_to_interleaved(RoPE(H, L)(interleaved_to_half(x)))

bit for bit.  Hugging Face's ``permute`` in its LLaMA conversion script is
``interleaved_to_half(w, axis=0, heads=n_heads)`` on the q and k projection
weights (rows = output features, grouped by head).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import as_axis, as_size, native, plain_array

__all__ = ["half_to_interleaved", "interleaved_to_half"]


def _order(head_size: int, heads: int, to_half: bool) -> np.ndarray:
    """Index along the converted axis: for each head, where each new channel comes from."""
    half = head_size // 2
    pairs = np.arange(half)
    within = np.arange(head_size)
    if to_half:  # new h < half takes 2h, new h + half takes 2h + 1
        within[: 2 * half] = np.concatenate([2 * pairs, 2 * pairs + 1])
    else:  # new 2i takes i, new 2i + 1 takes i + half
        within[: 2 * half] = np.stack([pairs, pairs + half], axis=1).reshape(-1)
    return (np.arange(heads)[:, np.newaxis] * head_size + within).reshape(-1)


def _convert(a: Any, axis: int, heads: int, to_half: bool) -> np.ndarray:
    array = plain_array(a, "a")
    if array.ndim == 0:
        came = "a 0-d array" if isinstance(a, np.ndarray) else type(a).__name__
        raise ValueError(f"a must have at least 1 dimension, got {came}")
    axis = as_axis(axis, "axis", array.ndim)
    heads = as_size(heads, "heads", minimum=1)
    length = array.shape[axis]
    if length % heads:
        raise ValueError(
            f"the axis of length {length} does not split into {heads} heads of equal size"
        )
    out = np.empty_like(array, dtype=native(array.dtype), order="K")
    if not length:  # no channels, whatever the number of heads: no order to make
        return out
    return np.take(array, _order(length // heads, heads, to_half), axis=axis, out=out)


def interleaved_to_half(a: Any, axis: int = 0, heads: int = 1) -> np.ndarray:
    """Reorder channels from interleaved pairs (2i, 2i+1) to the half split (i, i + H/2).

    Parameters
    ----------
    a : array_like
        Activations (Julia layout: ``axis=0`` is the head dimension) or
        projection weights (``axis`` = the output-feature axis, ``heads`` heads
        of ``H`` rows each).
    axis : int, default 0
        0-based axis holding ``heads * H`` channels.
    heads : int, default 1
        Number of heads stacked along ``axis``; each is reordered on its own.

    Returns
    -------
    numpy.ndarray
        A new array in ``a``'s memory order and the machine's byte order:
        per head, channels ``0, 2, 4, ..., 1, 3, 5, ...`` of the input (for
        an odd ``H`` the last channel stays last).

    Examples
    --------
    >>> interleaved_to_half(np.array([0, 1, 2, 3, 4, 5]))
    array([0, 2, 4, 1, 3, 5])
    >>> interleaved_to_half(np.arange(8), heads=2)
    array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    return _convert(a, axis, heads, to_half=True)


def half_to_interleaved(a: Any, axis: int = 0, heads: int = 1) -> np.ndarray:
    """Reorder channels from the half split (i, i + H/2) to interleaved pairs (2i, 2i+1).

    The inverse of :func:`interleaved_to_half`, with the same parameters.

    Examples
    --------
    >>> half_to_interleaved(np.array([0, 2, 4, 1, 3, 5]))
    array([0, 1, 2, 3, 4, 5])
    """
    return _convert(a, axis, heads, to_half=False)
