"""Sinusoidal absolute position embeddings (AbsolutePE), as in PositionalEmbeddings.jl."""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ._checks import (
    as_array,
    as_flag,
    as_real,
    as_size,
    check_finite_angles,
    holdable,
    in_machine_order,
    native,
    output_for,
    plain_array,
    promote,
    resolve_positions,
    state_fields,
)
from ._direct import DirectCalls, is_offset, read_ids
from ._kernels import (
    absolute_direct,
    absolute_forward,
    absolute_ids,
    absolute_ids_direct,
    absolute_table,
    decoding_ids,
    ids_run,
)
from ._views import grown_copy, may_share_memory, owned, read_only, run_forward
from .frequencies import frequency_bands

__all__ = [
    "AbsolutePE",
    "add_embeddings",
    "remember_sum",
    "remembered_sum",
    "seq_first",
    "sequence_positions",
]

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
    embedding_size : int
        The feature size given.
    max_length : int
        The longest sequence given.
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

    ``embeddings`` is stored row by row (C order), which Julia's layout of
    ``x`` (seq innermost) reads contiguously.  Calls on other layouts (C
    order with the batch axis innermost, ``batch_first``) read all channels
    of a position at once, from a position-major copy of the table (as
    Julia stores it) that is kept and covers the positions used so far
    (grown by doubling, up to ``max_length``).

    The fields are read-only, as those of Julia's immutable struct:
    assigning one raises ``AttributeError``.

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

    __slots__ = ("_by_position", "_direct", "_embedding_size", "_embeddings", "_max_length")

    def __init__(self, embedding_size: int, max_length: int, base: float = 10_000) -> None:
        embedding_size = _checked_embedding_size(embedding_size)
        max_length = as_size(max_length, "max_length")
        base = as_real(base, "base")
        holdable((embedding_size, max_length), _TABLE_DTYPE, "AbsolutePE's table")
        theta = frequency_bands(embedding_size, base)
        with np.errstate(over="ignore", invalid="ignore"):
            check_finite_angles(theta * max(max_length - 1, 0), "sin", "positions × frequencies")
        embeddings = np.empty((embedding_size, max_length), dtype=_TABLE_DTYPE)
        absolute_table(theta, embeddings)
        self._set_table(embeddings)

    def __getstate__(self) -> dict[str, Any]:
        """For pickle and copy: the fields.  What is kept for faster calls
        (the position-major copy, remembered compiled calls) is rebuilt by
        the copy as it is used."""
        return {
            "embedding_size": self._embedding_size,
            "max_length": self._max_length,
            "embeddings": self._embeddings,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Checked as the constructor checks its sizes, and the table
        against them: float32, of shape ``(embedding_size, max_length)``."""
        embedding_size, max_length, table = state_fields(
            state, "AbsolutePE", ("embedding_size", "max_length", "embeddings")
        )
        shape = (_checked_embedding_size(embedding_size), as_size(max_length, "max_length"))
        table = plain_array(table, "embeddings")
        if native(table.dtype) != _TABLE_DTYPE:
            raise TypeError(f"embeddings must be float32, got {table.dtype}")
        if table.shape != shape:
            raise ValueError(
                f"embeddings must have shape (embedding_size={shape[0]}, "
                f"max_length={shape[1]}), got {table.shape}"
            )
        self._set_table(owned(np.asarray(table, _TABLE_DTYPE, order="C")))  # unpickled: writeable

    def _set_table(self, embeddings: np.ndarray) -> None:
        """Keep ``embeddings``, the layer's own (embedding_size, max_length)
        float32 table in C order; its sizes are the layer's."""
        self._embedding_size, self._max_length = (int(length) for length in embeddings.shape)
        self._embeddings = read_only(embeddings)
        self._by_position: np.ndarray | None = None
        self._direct = DirectCalls()

    # Julia's AbsolutePE is an immutable struct: its fields are read, never
    # assigned (the copy of the table that some layouts read follows from them).

    @property
    def embedding_size(self) -> int:
        """Feature size d_model, the table's rows."""
        return self._embedding_size

    @property
    def max_length(self) -> int:
        """Longest sequence supported, the table's columns."""
        return self._max_length

    @property
    def embeddings(self) -> np.ndarray:
        """The table, float32 (embedding_size, max_length), read-only."""
        return self._embeddings

    def __call__(
        self,
        x: Any,
        out: np.ndarray | None = None,
        *,
        offset: int = 0,
        batch_first: bool = False,
        positions: Any = None,
    ) -> np.ndarray:
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
        offset : int, default 0
            Opt-in, beyond Julia: position of the first row (a
            ``startPos``, for cached decoding): rows take the embeddings of
            positions ``offset .. offset + seq_len - 1``.
        batch_first : bool, default False
            Opt-in, beyond Julia: ``x`` is laid out (batch, seq_len, features)
            as in PyTorch (``x + pe[:seq_len]``) instead of Julia's (seq_len,
            features, batch...).  Exactly 3 dims.
        positions : array_like of int, optional
            Opt-in, beyond Julia: explicit position ids, each in ``[0,
            max_length)``, shape ``(seq_len,)`` (one per sequence position) or
            ``x``'s shape without its features axis (one per position and batch
            column: ``(seq_len, batch...)``, or ``(batch, seq_len)`` with
            ``batch_first``, as PyTorch's ``position_ids`` of left-padded
            sequences).  Excludes ``offset``.

        Returns
        -------
        numpy.ndarray
            ``x + embeddings[:, offset:offset+seq_len].T`` broadcast over the
            batch axes; dtype float64 for float64 input, else float32 (Julia's
            ``promote_type(eltype(x), Float32)``); in ``x``'s memory order.

        Raises
        ------
        TypeError
            Unsupported dtype of ``x``; non-integer ``offset``/``positions``;
            ``out`` of the wrong type or dtype.
        ValueError
            Fewer than 3 dims; "Channel dimension must match embedding size";
            "Sequence length exceeds maximum length"; "positions must lie in
            [0, L)"; a bad ``out``.
        """
        y = remembered_sum(self._direct, x, out, offset, batch_first, positions)
        if y is not None:
            return y
        y = add_embeddings(
            self._embeddings, x, out, offset, batch_first, self._position_major, positions
        )
        remember_sum(
            self._direct,
            self._embeddings,
            self._by_position,
            x,
            y,
            out is None,
            offset,
            batch_first,
            positions,
        )
        return y

    def _position_major(self, stop: int) -> np.ndarray:
        """The table in F order (each position's channels adjacent) for at
        least positions ``0 .. stop - 1``, kept for the next call.  The copy
        made here is returned, not the attribute read again: another thread
        may have stored a shorter one since."""
        kept = grown_copy(self._by_position, self._embeddings, stop, "F")
        self._by_position = kept
        return kept

    def __repr__(self) -> str:
        return f"AbsolutePE(embedding_size={self.embedding_size}, max_length={self.max_length})"


def _checked_embedding_size(embedding_size: Any) -> int:
    """``embedding_size`` as AbsolutePE takes it: a size, even or 1."""
    embedding_size = as_size(embedding_size, "embedding_size")
    if embedding_size % 2 and embedding_size > 1:
        raise ValueError(
            f"embedding_size must be even (or 1), got {embedding_size}: "
            "Julia's AbsolutePE raises DimensionMismatch (one cos row fewer "
            "than sin rows)"
        )
    return embedding_size


def remembered_sum(
    direct: DirectCalls,
    x: Any,
    out: np.ndarray | None,
    offset: Any,
    batch_first: Any,
    positions: Any = None,
) -> np.ndarray | None:
    """``x + table`` by a call ``direct`` remembers (at an offset, or
    reading position ids as ``_remembered_ids`` says), or None where it has
    none (``DirectCalls.call``): the fast path of every additive encoding's
    call.  Batch-first calls are remembered as the (seq, features, batch)
    views they are, with their ids as (seq, batch).  ``batch_first`` may be
    numpy's bool (one of two objects, as Python's)."""
    axes = None
    if batch_first is False or batch_first is np.False_:
        view, out_view = x, out
    elif (
        (batch_first is True or batch_first is np.True_)
        and type(x) is np.ndarray
        and x.ndim == 3
        and (out is None or _three_d(out))
    ):
        view, out_view = _julia_axes(x, out, True)
        axes = _JULIA_AXES
    else:
        return None
    ids = None
    if positions is not None:
        if type(view) is not np.ndarray:
            return None
        read = _remembered_ids(view, positions, offset, axes is not None)
        if read is None:
            return None
        ids, offset = read
        if ids is None:  # a run, read as its offset
            positions = None
    y = direct.call(view, out_view, offset, positions, axes, ids)
    if y is None or axes is None or out is None:
        return y  # with axes, a new output in x's axes
    return out


def _remembered_ids(
    x: np.ndarray, positions: Any, offset: Any, batch_first: bool
) -> tuple[np.ndarray | None, Any] | None:
    """The ids and the offset with which a remembered call of a (seq,
    features, batch...) ``x`` reads ``positions`` (given as (batch, seq)
    when ``batch_first``, ``offset`` beside them), as ``_loop_positions``
    reads the checked ids: a decoding step's ids per column as they are; a
    run ``k, k + 1, ..`` in every column as the offset ``k`` (ids None);
    other ids per column of a 3-D ``x`` as they are.  None where no
    remembered call takes them: what ``read_ids`` leaves to the checks, ids
    of a shape they refuse, a run beside an offset other than 0 (refused
    there too), other ids."""
    ids = read_ids(positions)
    if ids is None:
        return None
    if batch_first and ids.ndim == 2:
        ids = ids.T
    if decoding_ids(x, ids):
        return ids, offset  # a record's key holds its ids' shape
    if not ids.ndim or ids.shape[0] != x.shape[0]:
        return None  # refused by the checks
    start = ids_run(ids)
    if start >= 0:
        if ids.ndim > 1 and ids.shape[1:] != x.shape[2:]:
            return None  # the offset's record holds no ids' shape
        return (None, start) if is_offset(offset) and offset == 0 else None
    if ids.ndim == 2 and x.ndim == 3:
        return ids, offset
    return None


def remember_sum(
    direct: DirectCalls,
    table: Any,
    by_position: np.ndarray | None,
    x: Any,
    y: np.ndarray,
    new: bool,
    offset: Any,
    batch_first: Any,
    positions: Any = None,
) -> None:
    """After ``y = add_embeddings(...)`` of ``x`` at ``offset`` or reading
    ``positions`` (checked; ``new``: ``y`` is an output the call made), have
    ``direct`` remember its loop for the next call of the same layout
    (``remembered_sum``): with ids, the loop ``_loop_positions`` chose for
    them, the offset's for a run of ids, the loop of ids per column for ids
    per column of a 3-D ``x``.  ``table`` is the (features, positions) table
    the call read; ``by_position``, if not None, the same table in F order,
    which the loops reading a position at a time read instead (it may cover
    fewer positions).  Only native float tables are read by a remembered
    loop.  ``batch_first`` is the flag the checks took (a Python or a numpy
    bool)."""
    tables = (table,) if by_position is None else (table, by_position)
    if type(x) is not np.ndarray or not all(map(_native_float, tables)):
        return
    view, y_view = _julia_axes(x, y, batch_first)  # the checks ran on x itself if native
    if y_view is None or not x.dtype.isnative:
        return
    where: int | np.ndarray = operator.index(offset)
    if positions is not None:
        where = _loop_positions(view, _read_ids(positions, batch_first))  # checked ids
    find = partial(absolute_direct, table=table, by_position=by_position)
    if isinstance(where, np.ndarray):
        if where.ndim != 2 or view.ndim != 3:
            return
        find = partial(absolute_ids_direct, table=table, by_position=by_position, ids=where)
    direct.remember(
        view,
        y_view,
        new,
        where,
        table.shape[1] - view.shape[0],
        find,
        _JULIA_AXES if batch_first else None,
        seq_axis=0,
    )


def _read_ids(positions: Any, batch_first: bool) -> np.ndarray:
    """Position ids the checks took, as ``intp`` (as they convert them),
    with ``batch_first`` 2-D (batch, seq) ids as their (seq, batch) view
    (the checks transpose them after converting, as here)."""
    ids = positions if type(positions) is np.ndarray else np.asarray(positions)
    if ids.dtype != np.intp:
        ids = ids.astype(np.intp)
    return ids.T if batch_first and ids.ndim == 2 else ids


def _native_float(table: Any) -> bool:
    """Whether ``table`` is an ndarray of native float32 or float64."""
    return type(table) is np.ndarray and (table.dtype == np.float32 or table.dtype == np.float64)


def _three_d(out: Any) -> bool:
    """Whether ``out`` is a 3-D ndarray (what ``_julia_axes`` can view)."""
    return type(out) is np.ndarray and out.ndim == 3


_JULIA_AXES = (1, 2, 0)
"""The axes of a (batch, seq, features) array that give Julia's (seq,
features, batch) view of it (``_julia_axes``)."""


def _julia_axes(
    x: np.ndarray, out: np.ndarray | None, batch_first: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """3-D ``x`` and ``out`` with Julia's axes (seq, features, batch): views
    of (batch, seq, features) arrays when ``batch_first``, where ``out``, if
    it is ``x``, stays ``x``'s very view (in place)."""
    if not batch_first:
        return x, out
    view = x.transpose(_JULIA_AXES)
    return view, view if out is x else None if out is None else out.transpose(_JULIA_AXES)


def seq_first(x: np.ndarray, name: str, batch_first: bool) -> np.ndarray:
    """``x`` (named ``name`` in errors) with Julia's axes (seq, features,
    batch...): ``x`` itself, or with ``batch_first`` the (seq, features,
    batch) view of a (batch, seq, features) ``x``, which must have 3 dims
    (ValueError)."""
    if not batch_first:
        return x
    if x.ndim != 3:
        raise ValueError(
            f"{name} must be (batch, seq_len, features) with batch_first=True, got shape {x.shape}"
        )
    return x.transpose(_JULIA_AXES)


def add_embeddings(
    table: np.ndarray,
    x: Any,
    out: np.ndarray | None,
    offset: Any,
    batch_first: Any,
    position_major: Callable[[int], np.ndarray] | None = None,
    positions: Any = None,
) -> np.ndarray:
    """``x + table[:, offset:offset+seq_len].T``, broadcast over the batch axes.

    The forward pass of every additive encoding.  ``table`` is a read-only
    (channels, positions) array or view; ``x`` is (seq, channels, batch...),
    or (batch, seq, channels) when ``batch_first``.  ``position_major``, if
    given, returns the same table in F order (at least its positions up to
    the argument), for the layouts of ``x`` that read it a position at a
    time.  ``positions``, if given, are the ids each position reads in
    place of ``offset ..`` (``sequence_positions``).  Checks follow Julia's
    AbsolutePE: channels first, then the sequence length.
    """
    batch_first = as_flag(batch_first, "batch_first")
    x = as_array(x, "x", 3)
    julia_x = seq_first(x, "x", batch_first)
    channels = julia_x.shape[1]
    if channels != table.shape[0]:
        raise ValueError(
            "Channel dimension must match embedding size: expected "
            f"{table.shape[0]}, got {channels}"
        )
    where = sequence_positions(x, "x", batch_first, table.shape[1], offset, positions)
    if isinstance(where, np.ndarray):
        where = _loop_positions(julia_x, where)
    out = output_for(x, promote(x.dtype, table.dtype), out)
    if isinstance(where, np.ndarray) and may_share_memory(where, out):
        # Ids where the call writes (x's memory, in place): read before the
        # loop writes over them, as numpy reads such an input (and RoPE).
        where = where.copy()
    view = seq_first(in_machine_order(x), "x", batch_first)
    out_view = out.transpose(_JULIA_AXES) if batch_first else out
    if not isinstance(where, np.ndarray):
        run_forward(absolute_forward, view, out_view, table, where, position_major)
    elif where.ndim == 1:  # the ids' columns, in order, as a table read from 0
        by_position = None if position_major is None else partial(_read_at, position_major, where)
        run_forward(absolute_forward, view, out_view, _columns_at(table, where), 0, by_position)
    else:
        run_forward(
            absolute_ids, view, out_view, table, position_major, columns=where, columns_lack=1
        )
    return out


def sequence_positions(
    x: np.ndarray, name: str, batch_first: bool, length: int, offset: Any, positions: Any
) -> int | np.ndarray:
    """Where the positions of ``x`` (named ``name``: (seq, features,
    batch...), or (batch, seq, features) when ``batch_first``) read a table
    of ``length`` positions (``resolve_positions``): the offset, or the
    position ids in Julia's axes, (seq,) or (seq, batch...).  Ids come as
    shape (seq,) or one per position and batch column: ``x``'s shape
    without its features axis, (batch, seq) when ``batch_first`` (PyTorch's
    ``position_ids``)."""
    seq_len = seq_first(x, name, batch_first).shape[0]
    columns = x.shape[:2] if batch_first else (seq_len, *x.shape[2:])
    where = resolve_positions(seq_len, columns, length, offset, positions, name=name)
    if batch_first and isinstance(where, np.ndarray) and where.ndim == 2:
        return where.T
    return where


def _loop_positions(x: np.ndarray, ids: np.ndarray) -> int | np.ndarray:
    """The offset or the ids the loop reads for checked ids (``intp``, in
    Julia's axes) of a (seq, features, batch...) ``x``: a decoding step's
    ids per column as they are, which always run the loop of ids per
    column (ids the same in every column too), so that a layout's first
    step compiles the loop its next steps run; other ids in their plainest
    form (``_plainest``)."""
    return ids if decoding_ids(x, ids) else _plainest(ids)


def _plainest(ids: np.ndarray) -> int | np.ndarray:
    """Position ids (seq,) or (seq, batch...) in the plainest form that
    gives the same sums: ids the same in every batch column as one column,
    and a run ``k, k + 1, ..`` as its offset ``k`` (as ``arange(seq)``
    expanded over the batch, PyTorch's usual ``position_ids``)."""
    if ids.ndim > 1:
        columns = ids.reshape(ids.shape[0], -1)
        if columns.shape[1] == 0 or not (columns == columns[:, :1]).all():
            return ids
        ids = columns[:, 0]
    if ids.size == 0:
        return 0
    return int(ids[0]) if (np.diff(ids) == 1).all() else ids


def _read_at(position_major: Callable[[int], np.ndarray], ids: np.ndarray, stop: int) -> np.ndarray:
    """The columns ``ids`` of the F-ordered table ``position_major`` gives
    (``absolute_forward``'s ``by_position`` for the table they make: ``stop``
    is their count)."""
    return _columns_at(position_major(int(ids.max()) + 1), ids)


def _columns_at(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The columns ``ids`` of a (features, positions) ``table``, read-only
    and in its memory order (F order for an F-ordered table, else C): a
    table of the type the loops were compiled for."""
    if table.flags.f_contiguous and not table.flags.c_contiguous:
        return read_only(np.take(table.T, ids, axis=0).T)
    return read_only(np.take(table, ids, axis=1))
