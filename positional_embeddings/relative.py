"""Relative position encodings: Shaw et al.'s clipped distances and T5's buckets.

Both are laid out (length_q, length_k) like their sources (query rows, key
columns); transpose for Julia's (key, query) scores layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import (
    INT_MAX,
    MAX_QUERY_OFFSET,
    as_flag,
    as_float_dtype,
    as_size,
    held_table,
    holdable,
    integer_array,
)
from ._kernels import gather_rows, relative_index, t5_bucket
from .learned import as_std, drawn_table, pickled_table

__all__ = ["RelativePE", "relative_position_index", "t5_relative_position_bucket"]

_MAX_CLIP = INT_MAX // 2
"""The largest clipping distance k: indices reach 2k, which must fit in int64."""


def relative_position_index(
    length_q: int, length_k: int, max_relative_position: int, *, offset: int = 0
) -> np.ndarray:
    """Indices of clipped relative distances: ``clip(j - (offset + i), -k, k) + k``.

    Parameters
    ----------
    length_q, length_k : int
        Number of queries and keys (>= 0).
    max_relative_position : int
        The clipping distance k (>= 0, at most ``(2**63 - 1) // 2``).
    offset : int, default 0
        The position of the first query (``0 <= offset <= 2**62``; keys
        are at positions ``0 .. length_k - 1``): for cached decoding, a
        step's query after ``L`` cached keys is at ``offset=L``.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(length_q, length_k)``, values in ``[0, 2k]``; entry
        ``[i, j]`` is for query ``i`` and key ``j``.

    Examples
    --------
    >>> relative_position_index(3, 4, 1)
    array([[1, 2, 2, 2],
           [0, 1, 2, 2],
           [0, 0, 1, 2]])
    """
    length_q = as_size(length_q, "length_q")
    length_k = as_size(length_k, "length_k")
    clip = as_size(max_relative_position, "max_relative_position", maximum=_MAX_CLIP)
    offset = as_size(offset, "offset", maximum=MAX_QUERY_OFFSET)
    holdable((length_q, length_k), np.int64, "the index")
    index = np.empty((length_q, length_k), dtype=np.int64)
    relative_index(clip, offset, index)
    return index


class RelativePE:
    """Learned embeddings of clipped relative distances (Shaw et al., 2018).

    Beyond Julia: a trainable table of ``2k + 1``
    rows, one per distance ``j - i`` in ``[-k, k]`` (longer distances are
    clipped), gathered into a (length_q, length_k, embedding_size) tensor.

    Parameters
    ----------
    max_relative_position : int
        The clipping distance k (>= 0).
    embedding_size : int
        Feature size (>= 0).
    std : real, finite and >= 0, default 1.0
        Initial values from N(0, std²), as ``torch.nn.Embedding`` initialises.
    seed : int or numpy.random.Generator, optional
    dtype : numpy float type, default ``np.float32``

    Attributes
    ----------
    embeddings : numpy.ndarray
        Shape ``(2k + 1, embedding_size)``, writeable; row ``d + k`` is
        distance ``d``.  Assigning another array holds it, not a copy: a 2-D
        float16/32/64 array in the machine's byte order with an odd number
        of rows; ``max_relative_position`` and ``embedding_size`` follow it.
    max_relative_position : int
        Read from the table's shape (its rows are 2k + 1).
    embedding_size : int
        Read from the table's shape (its columns).

    Examples
    --------
    >>> rel = RelativePE(2, 8, seed=0)
    >>> rel(5, 7).shape
    (5, 7, 8)
    >>> bool(np.array_equal(rel(5, 7)[0, 6], rel.embeddings[4]))  # distance 6 clips to 2
    True
    """

    __slots__ = ("_embeddings",)

    def __init__(
        self,
        max_relative_position: int,
        embedding_size: int,
        *,
        std: float = 1.0,
        seed: Any = None,
        dtype: Any = np.float32,
    ) -> None:
        clip = as_size(max_relative_position, "max_relative_position", maximum=_MAX_CLIP)
        embedding_size = as_size(embedding_size, "embedding_size")
        std = as_std(std)
        dtype = as_float_dtype(dtype, "dtype", julia=False)
        self.embeddings = drawn_table((2 * clip + 1, embedding_size), std, seed, dtype)

    def __getstate__(self) -> dict[str, Any]:
        """For pickle (every protocol) and copy: the table."""
        return {"embeddings": self._embeddings}

    def __setstate__(self, state: Any) -> None:
        self.embeddings = pickled_table(state, type(self).__name__)  # checked as an assigned table

    @property
    def embeddings(self) -> np.ndarray:
        """The table itself, (2k + 1, embedding_size)."""
        return self._embeddings

    @embeddings.setter
    def embeddings(self, embeddings: Any) -> None:
        self._embeddings = _distance_table(embeddings)

    @property
    def max_relative_position(self) -> int:
        """The clipping distance k: the table has ``2k + 1`` rows."""
        return int(self._embeddings.shape[0]) // 2

    @property
    def embedding_size(self) -> int:
        """Columns of the table."""
        return int(self._embeddings.shape[1])

    def __call__(self, length_q: int, length_k: int, *, offset: int = 0) -> np.ndarray:
        """The embedding of each (query, key) distance: (length_q, length_k, embedding_size).

        ``offset`` is the position of the first query, as for
        :func:`relative_position_index`.  The table is checked again as it
        is now (reshaped or retyped in place since it was assigned, it could
        otherwise be read out of bounds)."""
        table = _distance_table(self._embeddings)
        length_q, length_k = as_size(length_q, "length_q"), as_size(length_k, "length_k")
        offset = as_size(offset, "offset", maximum=MAX_QUERY_OFFSET)
        holdable((length_q, length_k, table.shape[1]), table.dtype, "the embeddings")
        if not table.shape[1]:
            return np.empty((length_q, length_k, 0), dtype=table.dtype)
        index = relative_position_index(length_q, length_k, table.shape[0] // 2, offset=offset)
        gathered = np.empty((*index.shape, table.shape[1]), dtype=table.dtype)
        storage = np.uint16 if table.dtype == np.float16 else table.dtype
        gather_rows(table.view(storage), index, gathered.view(storage))
        return gathered

    def __repr__(self) -> str:
        return (
            f"RelativePE(max_relative_position={self.max_relative_position}, "
            f"embedding_size={self.embedding_size})"
        )


def _distance_table(embeddings: Any) -> np.ndarray:
    """``RelativePE``'s table, checked: one row per distance in ``[-k, k]``."""
    table = held_table(embeddings, "embeddings", "(2k + 1, embedding_size)", float16=True)
    if table.shape[0] % 2 == 0:
        raise ValueError(
            "embeddings must have 2k + 1 rows (distances -k .. k), an odd number, "
            f"got shape {table.shape}"
        )
    return table


def t5_relative_position_bucket(
    relative_position: Any,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> np.ndarray:
    """T5's bucket of each relative position (key position minus query position).

    Distances below ``num_buckets // 2``, or ``num_buckets // 4`` per
    direction when bidirectional (each direction then has half the
    buckets), get a bucket each; longer ones share logarithmically wider buckets up
    to ``max_distance``, beyond which everything falls in the last bucket.

    Parameters
    ----------
    relative_position : array_like of int
        ``key_position - query_position``, any shape.
    bidirectional : bool, default True
        Separate buckets for keys after the query (encoder); if False, keys
        after the query share bucket 0 (decoder).
    num_buckets : int, default 32
    max_distance : int, default 128

    Returns
    -------
    numpy.ndarray
        int64 buckets in ``[0, num_buckets)``, the shape of ``relative_position``,
        in its memory order.

    Notes
    -----
    PyTorch: Hugging Face ``T5Attention._relative_position_bucket``; the
    logarithm is taken in float32 as torch does.  For a (query, key) grid:
    ``t5_relative_position_bucket(np.arange(lk)[None, :] - np.arange(lq)[:, None])``.

    Examples
    --------
    >>> t5_relative_position_bucket(np.array([-3, -1, 0, 1, 3, 200]))
    array([ 3,  1,  0, 17, 19, 31])
    """
    bidirectional = as_flag(bidirectional, "bidirectional")
    num_buckets = as_size(num_buckets, "num_buckets")
    max_distance = as_size(max_distance, "max_distance")
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if exact < 1 or max_distance <= exact:
        fewest, share = (4, "num_buckets // 4") if bidirectional else (2, "num_buckets // 2")
        raise ValueError(
            f"need at least 2 buckets per direction (num_buckets >= {fewest} with "
            f"bidirectional={bidirectional}) and max_distance above the exact ones "
            f"({share}), got num_buckets={num_buckets}, max_distance={max_distance}"
        )
    relative = integer_array(relative_position, "relative_position")
    if relative.dtype.kind not in "iu":
        relative = relative.astype(np.int64)  # [] (float64 to numpy): no positions
    flat = relative.reshape(-1)
    if relative.dtype.itemsize == 8:
        # Distances beyond int64 (uint64), and int64's most negative value
        # (which has no negation), are clipped: far beyond max_distance, their
        # bucket is the last one either way.
        flat = np.clip(flat, max(int(np.iinfo(relative.dtype).min), -INT_MAX), INT_MAX)
    flat = flat.astype(np.int64)
    buckets = np.empty_like(flat)
    t5_bucket(flat, bidirectional, num_buckets, max_distance, buckets)
    if relative.flags.c_contiguous:
        return buckets.reshape(relative.shape)
    laid_out = np.empty_like(relative, np.int64)  # in relative_position's memory order
    laid_out[...] = buckets.reshape(relative.shape)
    return laid_out
