"""Slow, obvious references: the formulas of PositionalEmbeddings.jl, loop by loop.

Each function follows the Julia source (src/PositionalEmbeddings.jl, v0.6.3)
one statement at a time, in plain Python and numpy scalar arithmetic, with no
attempt at speed.  Julia's promotion is spelled out: every operation happens
in the promoted float type (numpy float16 scalars, like Julia's Float16,
compute in float32 and round back after each operation).

Two things are *not* reproduced here: Julia's own ``sin``/``cos``/``^``
(``math.sin`` etc. are the C library's, within 1 ULP of Julia's), so tables
are compared with a 1-ULP tolerance, and the exact tables are checked
against the recorded Julia outputs in ``parity/``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def promote(x_dtype: np.dtype, T: np.dtype) -> np.dtype:
    """Julia's promote_type(eltype(x), T): bool and integers take T."""
    if np.dtype(x_dtype).kind in "biu":
        return np.dtype(T)
    return np.promote_types(x_dtype, T)


def julia_mul(a, b, T: np.dtype):
    """``a * b`` in Julia, for a float ``b`` and a result type ``T``."""
    t = np.dtype(T).type
    if isinstance(a, (bool, np.bool_)):  # Julia: false is a strong zero
        return t(b) if a else t(math.copysign(0.0, float(b)))
    return t(a) * t(b)


def julia_add(a, b, T: np.dtype):
    """``a + b`` in Julia, for a float ``b`` and a result type ``T``."""
    t = np.dtype(T).type
    if isinstance(a, (bool, np.bool_)):  # Julia: ifelse(a, 1 + b, b)
        return t(1) + t(b) if a else t(b)
    return t(a) + t(b)


def compute_frequencies(dim: int, seq_len: int, base: float = 10_000) -> np.ndarray:
    theta = [1.0 / float(base) ** (k / dim) for k in range(0, dim, 2)]  # k = 2i
    out = np.empty((len(theta), seq_len))
    for i, t in enumerate(theta):
        for p in range(seq_len):
            out[i, p] = t * float(p)
    return out


def _round_to(value: float, T: np.dtype):
    """A float64 value rounded once to T (float16 through float32, as Julia's
    Float16 sin/cos do)."""
    T = np.dtype(T)
    if T == np.float16:
        return np.float16(np.float32(value))
    return T.type(value)


def rope_tables(head_size: int, seq_len: int, base=10_000, scale=1.0, T=np.float32):
    """cos_cached, sin_cached of RoPE (sin/cos of the T angle taken in float64)."""
    T = np.dtype(T)
    freqs = compute_frequencies(head_size, seq_len, base)
    half = freqs.shape[0]
    cos = np.empty((head_size, seq_len), T)
    sin = np.empty((head_size, seq_len), T)
    for i in range(half):
        for p in range(seq_len):
            angle = float(T.type(freqs[i, p] * float(scale)))
            for row in (i, i + half):
                cos[row, p] = _round_to(math.cos(angle), T)
                sin[row, p] = _round_to(math.sin(angle), T)
    return cos, sin


def neg_half(x: np.ndarray, dim: int = 0) -> np.ndarray:
    """cat(-x[d2:n], x[0:d2]) along ``dim``, negating in x's own type."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    n = x.shape[dim]
    d2 = n // 2
    high = np.take(x, range(d2, n), axis=dim)
    low = np.take(x, range(0, d2), axis=dim)
    return np.concatenate([-high, low], axis=dim)


def rope_apply(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """y = x .* cos + neg_half(x) .* sin, element by element."""
    T = promote(x.dtype, cos.dtype)
    neg = neg_half(x, 0)
    y = np.empty(x.shape, T)
    with np.errstate(all="ignore"):  # Inf and NaN inputs are part of the contract
        for index in np.ndindex(*x.shape):
            h, s = index[0], index[1]
            y[index] = julia_mul(x[index], cos[h, s], T) + julia_mul(neg[index], sin[h, s], T)
    return y


def absolute_table(embedding_size: int, max_length: int, base=10_000) -> np.ndarray:
    freqs = compute_frequencies(embedding_size, max_length, base)
    table = np.zeros((embedding_size, max_length), np.float32)
    for i in range(freqs.shape[0]):
        for p in range(max_length):
            table[2 * i, p] = np.float32(math.sin(freqs[i, p]))
            if 2 * i + 1 < embedding_size:
                table[2 * i + 1, p] = np.float32(math.cos(freqs[i, p]))
    return table


def absolute_apply(x: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """y[s, c, ...] = x[s, c, ...] + embeddings[c, s], element by element."""
    T = promote(x.dtype, embeddings.dtype)
    y = np.empty(x.shape, T)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*x.shape):
            s, c = index[0], index[1]
            y[index] = julia_add(x[index], embeddings[c, s], T)
    return y


def absolute_apply_ids(x: np.ndarray, embeddings: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """y[s, c, rest] = x[s, c, rest] + embeddings[c, ids[s, rest]], element
    by element; ``ids`` of shape (seq,) (the same for every batch column) or
    (seq, *x.shape[2:])."""
    T = promote(x.dtype, embeddings.dtype)
    columns = np.broadcast_to(
        ids.reshape(ids.shape + (1,) * (x.ndim - 1 - ids.ndim)), x.shape[:1] + x.shape[2:]
    )
    y = np.empty(x.shape, T)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*x.shape):
            s, c, rest = index[0], index[1], index[2:]
            y[index] = julia_add(x[index], embeddings[c, columns[(s, *rest)]], T)
    return y


def learned_gradient_ids(dy: np.ndarray, length: int, ids: np.ndarray) -> np.ndarray:
    """The table's gradient for ``dy`` (seq, features, batch...) read at
    ``ids`` (as ``absolute_apply_ids``): row ``p`` sums ``dy[s, :, rest]``
    over every ``(s, rest)`` whose id is ``p``, exactly (as fractions), then
    rounds once to float64."""
    columns = np.broadcast_to(
        ids.reshape(ids.shape + (1,) * (dy.ndim - 1 - ids.ndim)), dy.shape[:1] + dy.shape[2:]
    )
    sums = [[Fraction(0)] * dy.shape[1] for _ in range(length)]
    for s, *rest in np.ndindex(*columns.shape):
        p = columns[(s, *rest)]
        for c in range(dy.shape[1]):
            sums[p][c] += Fraction(float(dy[(s, c, *rest)]))
    return np.array([[float(v) for v in row] for row in sums]).reshape(length, dy.shape[1])


def causal_mask(seq_len: int) -> np.ndarray:
    mask = np.zeros((seq_len, seq_len, 1), bool)
    for i in range(seq_len):
        for j in range(seq_len):
            mask[i, j, 0] = j >= i
    return mask


def padding_mask(lengths, max_len: int) -> np.ndarray:
    mask = np.zeros((1, max_len, len(lengths)), bool)
    for b, length in enumerate(lengths):
        for p in range(max_len):
            mask[0, p, b] = p >= length
    return mask


def rope_apply_pairs(x, cos, sin, pairs, positions=None):
    """RoPE for any pairing and positions, element by element.

    For each pair (h1, h2): y[h1] = x[h1]*cos[h1] + (-x[h2])*sin[h1] and
    y[h2] = x[h2]*cos[h2] + x[h1]*sin[h2]; unpaired channels pass through.
    ``positions`` (broadcastable to x.shape[1:]) picks each table column;
    the default is the sequence index.
    """
    T = promote(x.dtype, cos.dtype)
    t = np.dtype(T).type
    columns = np.broadcast_to(
        np.arange(x.shape[1]).reshape((-1,) + (1,) * (x.ndim - 2))
        if positions is None
        else np.asarray(positions),
        x.shape[1:],
    )
    partner = {}
    for h1, h2 in pairs:
        partner[h1] = (h2, True)
        partner[h2] = (h1, False)
    y = np.empty(x.shape, T)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*x.shape):
            h, rest = index[0], index[1:]
            p = columns[rest]
            if h not in partner:
                y[index] = t(x[index])
                continue
            other, first = partner[h]
            x_other = x[(other, *rest)]
            if x.dtype == np.bool_:  # Julia's neg_half of Bool is Int for both halves
                x_other = np.int64(x_other)
            rotated = -x_other if first else x_other
            y[index] = julia_mul(x[index], cos[h, p], T) + julia_mul(rotated, sin[h, p], T)
    return y


def half_pairs(head_size):
    return [(i, i + head_size // 2) for i in range(head_size // 2)]


def interleaved_pairs(head_size):
    return [(2 * i, 2 * i + 1) for i in range(head_size // 2)]
