"""What the package is measured against: the numpy formulas and torch eager.

None of these is bit-exact with Julia; they are the code a user would write
instead, and only their speed matters here.  torch is optional: ``torch`` is
``None`` when it does not import, and every torch contender is then ``None``.

torch's OpenMP threads are told to sleep when idle (``OMP_WAIT_POLICY``,
unless set already): spinning, they would take a CPU from whichever
contender runs next, on a machine with few CPUs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from positional_embeddings import AbsolutePE, RoPE

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:
    import torch
except ImportError:
    torch = None

__all__ = [
    "absolute_table_numpy",
    "neg_half_numpy",
    "pe_numpy",
    "pe_torch",
    "rope_numpy",
    "rope_tables_numpy",
    "rope_torch",
    "torch",
]


def neg_half_numpy(x: np.ndarray) -> np.ndarray:
    """Julia's ``neg_half`` on the first axis: ``[-x2; x1]`` for halves ``x1, x2``."""
    half = x.shape[0] // 2
    return np.concatenate((-x[half:], x[:half]), axis=0)


def _broadcast_tables(rope: RoPE, x: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The tables' ``x.shape[1]`` positions from ``offset`` on, shaped to
    broadcast over ``x``'s axes after the second."""
    shape = (*x.shape[:2], *(1,) * (x.ndim - 2))
    positions = slice(offset, offset + x.shape[1])
    cos, sin = (table[:, positions].reshape(shape) for table in (rope.cos_cached, rope.sin_cached))
    return cos, sin


def rope_numpy(
    rope: RoPE, x: np.ndarray, offset: int = 0, positions: np.ndarray | None = None
) -> Callable[[], np.ndarray]:
    """``x * cos + neg_half(x) * sin`` at positions ``offset ..``, the tables
    broadcast over the batch axes; or with ``positions`` (ids of shape
    ``x.shape[1:]``), the tables' columns at the ids, gathered at each call
    as the package gathers them."""
    if positions is None:
        cos, sin = _broadcast_tables(rope, x, offset)
        return lambda: x * cos + neg_half_numpy(x) * sin
    cos, sin = rope.cos_cached, rope.sin_cached
    return lambda: x * cos[:, positions] + neg_half_numpy(x) * sin[:, positions]


def rope_torch(
    rope: RoPE, x: np.ndarray, offset: int = 0, positions: np.ndarray | None = None
) -> Callable[[], Any] | None:
    """Hugging Face's eager RoPE on a tensor sharing ``x``'s memory, at
    positions ``offset ..`` (or ``positions``, gathered at each call as
    ``rope_numpy``).

    ``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = cat((-x2, x1))``
    on the head axis (axis 0 in this layout), the tables cast to ``x``'s
    dtype as Hugging Face does.
    """
    if torch is None:
        return None
    tensor = torch.from_numpy(x)
    half = x.shape[0] // 2

    def rotate_half() -> Any:
        return torch.cat((-tensor[half:], tensor[:half]), dim=0)

    if positions is None:
        cos, sin = (
            torch.from_numpy(table.astype(x.dtype)) for table in _broadcast_tables(rope, x, offset)
        )
        return lambda: tensor * cos + rotate_half() * sin
    ids = torch.from_numpy(positions.astype(np.int64))
    cos, sin = (
        torch.from_numpy(table.astype(x.dtype)) for table in (rope.cos_cached, rope.sin_cached)
    )
    return lambda: tensor * cos[:, ids] + rotate_half() * sin[:, ids]


def _absolute_slice(pe: AbsolutePE, x: np.ndarray) -> np.ndarray:
    return pe.embeddings[:, : x.shape[0]].T[:, :, np.newaxis]


def _rows(pe: AbsolutePE, dtype: Any) -> np.ndarray:
    """The table as an embedding layer holds it: (positions, features), C order."""
    return np.ascontiguousarray(pe.embeddings.T, dtype)


def pe_numpy(
    pe: AbsolutePE, x: np.ndarray, positions: np.ndarray | None = None
) -> Callable[[], np.ndarray]:
    """``x + embeddings[:, :seq].T``, broadcast over the batch axis; or with
    ``positions`` (ids of shape (seq, batch)), the table's rows at the ids,
    gathered at each call as the package gathers them."""
    if positions is None:
        table = _absolute_slice(pe, x)
        return lambda: x + table
    rows = _rows(pe, pe.embeddings.dtype)
    return lambda: x + rows[positions].transpose(0, 2, 1)


def pe_torch(
    pe: AbsolutePE, x: np.ndarray, positions: np.ndarray | None = None
) -> Callable[[], Any] | None:
    """The same sum in torch eager, on a tensor sharing ``x``'s memory."""
    if torch is None:
        return None
    tensor = torch.from_numpy(x)
    if positions is None:
        table = torch.from_numpy(_absolute_slice(pe, x).astype(x.dtype))
        return lambda: tensor + table
    rows = torch.from_numpy(_rows(pe, x.dtype))
    ids = torch.from_numpy(positions.astype(np.int64))
    return lambda: tensor + rows[ids].transpose(1, 2)


def _angles(dim: int, seq_len: int, base: float) -> np.ndarray:
    theta = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    return np.outer(theta, np.arange(seq_len))


def rope_tables_numpy(
    head_size: int, seq_len: int, base: float = 10_000, dtype: Any = np.float32
) -> tuple[np.ndarray, np.ndarray]:
    """RoPE's (cos, sin) tables, ``(head_size, seq_len)``, in Julia's steps:
    angles rounded to ``dtype``, numpy's float64 ``cos``/``sin`` of them
    rounded to float32, then to ``dtype`` (Julia takes float16's in float32)."""
    angles = _angles(head_size, seq_len, base).astype(dtype).astype(np.float64)
    doubled = np.concatenate((angles, angles), axis=0)
    cos, sin = (
        function(doubled).astype(np.float32).astype(dtype, copy=False)
        for function in (np.cos, np.sin)
    )
    return cos, sin


def absolute_table_numpy(embedding_size: int, max_length: int, base: float = 10_000) -> np.ndarray:
    """AbsolutePE's float32 table: sin on even rows, cos on odd rows."""
    angles = _angles(embedding_size, max_length, base)
    table = np.empty((embedding_size, max_length), dtype=np.float32)
    table[0::2] = np.sin(angles)
    table[1::2] = np.cos(angles)
    return table
