"""Learned absolute position embeddings (BERT, GPT-2): a trainable table added to x."""

from __future__ import annotations

import math
import reprlib
import threading
from typing import Any, NamedTuple

import numpy as np

from ._checks import (
    INT_MAX,
    as_array,
    as_flag,
    as_float_dtype,
    as_real,
    as_size,
    held_table,
    holdable,
    native,
    promote,
    state_fields,
)
from ._direct import DirectCalls
from ._views import may_share, read_only
from .absolute import (
    add_embeddings,
    remember_sum,
    remembered_sum,
    seq_first,
    sequence_positions,
)

__all__ = ["LearnedPE", "as_std", "drawn_table", "pickled_table"]

# Held by every LearnedPE's assignments of its table and the checks again of
# a table reshaped in place, so that neither undoes the other.
_ASSIGNING = threading.Lock()


class _Held(NamedTuple):
    """A LearnedPE's table, its layout when it was checked, and the calls
    remembered for it: replaced as one, so that a call remembers its loop
    only for the table that loop reads, whichever thread assigns another."""

    table: np.ndarray
    layout: tuple[Any, ...]
    direct: DirectCalls

    @classmethod
    def of(cls, table: np.ndarray) -> _Held:
        """A checked ``table`` as it is laid out now, with no call remembered."""
        return cls(table, _layout(table), DirectCalls())


class LearnedPE:
    """A trainable (max_length, embedding_size) table added to x: ``y = x + pos[:seq_len]``.

    Beyond Julia: PyTorch's
    ``x + nn.Embedding(max_len, d)(arange(seq_len))``.  Same layouts, checks
    and dtype rules as :class:`AbsolutePE`, sharing its kernels; its sizes
    come in ``nn.Embedding``'s order, the other way round from
    ``AbsolutePE(embedding_size, max_length)``, as its table is laid out.

    Parameters
    ----------
    max_length : int
        Number of positions (>= 0).
    embedding_size : int
        Feature size (>= 0).
    std : real, finite and >= 0, default 0.02
        Initial values are drawn from N(0, std²), as BERT and GPT-2 initialise
        theirs (``initializer_range = 0.02``).
    seed : int or numpy.random.Generator, optional
        Random source for the initial values.
    dtype : np.float32 or np.float64, default np.float32

    Attributes
    ----------
    embeddings : numpy.ndarray
        Shape ``(max_length, embedding_size)``, writeable: train it in place
        (calls read it as it is then), or assign another array.
    max_length, embedding_size : int

    Examples
    --------
    >>> import numpy as np
    >>> pe = LearnedPE(1000, 512, seed=0)
    >>> x = np.zeros((100, 512, 32), np.float32)       # (seq, features, batch)
    >>> bool(np.array_equal(pe(x)[:, :, 3], pe.embeddings[:100]))
    True
    >>> dx, dtable = pe.backward(np.ones_like(x))      # dy summed over the batch
    >>> float(dtable[0, 0]), float(dtable[100, 0])
    (32.0, 0.0)
    """

    __slots__ = ("_held",)

    def __init__(
        self,
        max_length: int,
        embedding_size: int,
        *,
        std: float = 0.02,
        seed: Any = None,
        dtype: Any = np.float32,
    ) -> None:
        max_length = as_size(max_length, "max_length")
        embedding_size = as_size(embedding_size, "embedding_size")
        std = as_std(std)
        dtype = as_float_dtype(dtype, "dtype", float16=False, julia=False)
        self.embeddings = drawn_table((max_length, embedding_size), std, seed, dtype)

    @classmethod
    def from_table(cls, embeddings: Any) -> LearnedPE:
        """A LearnedPE holding ``embeddings`` (max_length, embedding_size) itself, not a copy."""
        pe = cls.__new__(cls)
        pe.embeddings = embeddings
        return pe

    def __getstate__(self) -> dict[str, Any]:
        """For pickle (every protocol) and copy: the table.  The remembered
        calls are made again by the copy as it is used."""
        return {"embeddings": self._held.table}

    def __setstate__(self, state: Any) -> None:
        self.embeddings = pickled_table(state, type(self).__name__)  # checked as an assigned table

    @property
    def embeddings(self) -> np.ndarray:
        """The table itself, (max_length, embedding_size) float32 or float64.

        Assigning another array takes the checks of :meth:`from_table` and
        holds that array, not a copy; ``max_length`` and ``embedding_size``
        follow it.  A table reshaped or retyped in place takes the same
        checks at the next call.
        """
        return self._held.table

    @embeddings.setter
    def embeddings(self, embeddings: Any) -> None:
        table = _checked(embeddings)
        with _ASSIGNING:
            held = getattr(self, "_held", None)
            if held is None or table is not held.table:  # not ``pe.embeddings -= ...``
                self._held = _Held.of(table)

    @property
    def max_length(self) -> int:
        """Rows of the table the layer holds now."""
        return int(self._held.table.shape[0])

    @property
    def embedding_size(self) -> int:
        """Columns of the table the layer holds now."""
        return int(self._held.table.shape[1])

    def _now(self) -> _Held:
        """The table as it is now and the calls remembered for it: checked
        again as an assigned table is where it was reshaped or retyped in
        place since, then with the remembered calls forgotten (unless
        another table was assigned meanwhile, which stays held)."""
        held = self._held
        if _layout(held.table) == held.layout:
            return held
        checked = _Held.of(_checked(held.table))
        with _ASSIGNING:
            if self._held is held:
                self._held = checked
        return checked

    def __call__(
        self,
        x: Any,
        out: np.ndarray | None = None,
        *,
        offset: int = 0,
        batch_first: bool = False,
        positions: Any = None,
    ) -> np.ndarray:
        """``x + embeddings[offset:offset+seq_len]`` over (seq_len, embedding_size, batch...).

        ``batch_first=True`` takes (batch, seq_len, embedding_size).
        ``positions`` (ids in ``[0, max_length)``, in place of ``offset``:
        PyTorch's ``x + embedding(position_ids)``), ``out`` and the dtype
        rules are those of :meth:`AbsolutePE.__call__`.
        """
        table, _, direct = self._now()
        if isinstance(out, np.ndarray) and may_share(table, out):
            # ``out`` (``x`` itself, in place) is part of the table the call
            # reads: read a copy, as numpy and Julia's ``broadcast!`` would
            # (rows written before they were read gave wrong sums).
            copy = read_only(table.T.copy(order="K"))
            return add_embeddings(copy, x, out, offset, batch_first, positions=positions)
        y = remembered_sum(direct, x, out, offset, batch_first, positions)
        if y is not None:
            return y
        # The loops read a read-only view, as AbsolutePE's table: Numba's types
        # tell the two apart, and the loops compiled for one serve the other.
        columns = read_only(table.T)
        y = add_embeddings(columns, x, out, offset, batch_first, positions=positions)
        remember_sum(direct, columns, None, x, y, out is None, offset, batch_first, positions)
        return y

    def backward(
        self, dy: Any, *, offset: int = 0, batch_first: bool = False, positions: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Vector-Jacobian product: ``(dx, dembeddings)`` for the output gradient ``dy``.

        ``dx = dy`` (a copy) and ``dembeddings[offset + s] = sum of dy[s]
        over the batch``, zero for the other rows (``δx = δy``, ``δpos =
        δy`` summed over the batch), in the table's dtype: summed
        in a type that holds every term, then rounded once (rounding each
        term to the table's type first lost cancelling terms): float ``dy``
        in Julia's promotion of its type and the table's (a float64 ``dy``
        of a float32 table in float64, as autograd does), integer and bool
        ``dy`` exactly in int64 where no sum can leave it, else in float64.

        The sum has the same bits whatever ``dy``'s memory order: numpy's
        sum of ``dy`` as a C-contiguous (seq, features, batch...) array
        (pairwise along the batch), copied so where it is stored otherwise.
        Summed where it lies, the order of the additions would follow the
        layout (one batch column after another in Julia's order), and so
        would the last bits.

        With ``positions`` (the forward pass's ids), row ``p`` sums the terms
        of every position (and batch column) whose id is ``p``, from -0.0,
        in the order of the ids (as C-ordered), then rounds once; rows no id
        names are +0.0.  Ids of shape (seq,) add the batch sums above, so
        ids ``offset ..`` give the offset's bits; ids per batch column add
        each column's term in turn.
        """
        table = self._now().table
        batch_first = as_flag(batch_first, "batch_first")
        dy = as_array(dy, "dy", 3)
        seq_len, channels = seq_first(dy, "dy", batch_first).shape[:2]
        if channels != table.shape[1]:
            raise ValueError(
                "Channel dimension must match embedding size: expected "
                f"{table.shape[1]}, got {channels}"
            )
        start = sequence_positions(dy, "dy", batch_first, table.shape[0], offset, positions)
        # Summed in the machine's byte order: numpy would sum another in
        # chunks of its casting buffer, to other bits.
        dx = dy.astype(native(dy.dtype), order="K")
        summed = np.ascontiguousarray(seq_first(dx, "dy", batch_first))
        batch_axes = tuple(range(2, summed.ndim))
        with np.errstate(over="ignore", invalid="ignore"):  # IEEE sums (inf + -inf), silent
            if isinstance(start, np.ndarray):
                return dx, _gradient_at(summed, start, table)
            grad = np.zeros_like(table)
            grad[start : start + seq_len] = summed.sum(
                axis=batch_axes, dtype=_sum_type(summed, table.dtype, math.prod(summed.shape[2:]))
            )
        return dx, grad

    def __repr__(self) -> str:
        return f"LearnedPE(max_length={self.max_length}, embedding_size={self.embedding_size})"


def _sum_type(dy: np.ndarray, table_dtype: np.dtype, terms: int) -> np.dtype:
    """The type ``LearnedPE.backward`` sums the elements of a (seq,
    features, batch...) ``dy`` in, up to ``terms`` of them in each of the
    table's elements (see there)."""
    if dy.dtype.kind not in "biu":
        return promote(dy.dtype, table_dtype)
    largest = max(abs(int(dy.min())), abs(int(dy.max()))) if dy.size else 0
    exact = largest * terms <= INT_MAX  # every partial sum fits
    return np.dtype(np.int64 if exact else np.float64)


def _gradient_at(dy: np.ndarray, ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The gradient of ``table`` (max_length, features) for a C-contiguous
    (seq, features, batch...) ``dy`` whose positions read the rows ``ids``,
    (seq,) or (seq, batch...) (``LearnedPE.backward``)."""
    summed_type = _sum_type(dy, table.dtype, dy.size // max(dy.shape[1], 1))
    if ids.ndim == 1:  # the batch sums of the offset's path
        terms = dy.sum(axis=tuple(range(2, dy.ndim)), dtype=summed_type)
    else:  # (seq, batch..., features): each id's row of terms
        terms = np.moveaxis(dy, 1, -1)
    sums = np.full(table.shape, -0.0, summed_type)  # -0.0 + t is t, signed zeros too
    np.add.at(sums, ids, terms)
    grad = sums.astype(table.dtype)
    unread = np.ones(table.shape[0], bool)
    unread[ids.ravel()] = False
    grad[unread] = 0
    return grad


def pickled_table(state: Any, layer: str) -> Any:
    """The table in the pickled state of a ``layer`` that holds a trainable
    one (LearnedPE, RelativePE): ``{"embeddings": table}``, or as the
    package pickled them before they had a ``__getstate__``: Python's state
    of their slots, ``(None, {"_embeddings": table, ...})``."""
    if isinstance(state, tuple) and len(state) == 2 and state[0] is None:
        (table,) = state_fields(state[1], layer, ("_embeddings",))
    else:
        (table,) = state_fields(state, layer, ("embeddings",))
    return table


def as_std(std: Any) -> float:
    """``std`` of a table's initial draws: a real number, finite and >= 0
    (an infinite one drew a table of infinities); a fraction rounded once,
    as numpy's ``normal`` reads it (no Julia layer draws tables)."""
    std = as_real(std, "std", julia=False)
    if not 0 <= std < math.inf:
        raise ValueError(f"std must be finite and >= 0, got {std}")
    return std


def drawn_table(shape: tuple[int, int], std: float, seed: Any, dtype: np.dtype) -> np.ndarray:
    """A trainable table's initial values: N(0, std²) draws from ``seed``,
    in ``dtype``, where a draw beyond its range is infinite, silently."""
    holdable(shape, np.float64, "the table")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as error:  # numpy's own words name no argument
        raise type(error)(
            "seed must be None, a non-negative integer (or a sequence of them), or a "
            f"numpy Generator, BitGenerator or SeedSequence, got {reprlib.repr(seed)} "
            f"({error})"
        ) from None
    drawn = rng.normal(0.0, std, size=shape)
    with np.errstate(over="ignore"):
        return drawn.astype(dtype)


def _checked(embeddings: Any) -> np.ndarray:
    """``embeddings`` checked as the table a LearnedPE may hold (``held_table``)."""
    return held_table(embeddings, "embeddings", "(max_length, embedding_size)", float16=False)


def _layout(table: np.ndarray) -> tuple[Any, ...]:
    """What a remembered call fixes of the table it reads, besides its memory."""
    return table.shape, table.strides, table.dtype
