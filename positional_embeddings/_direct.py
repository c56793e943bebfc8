"""Compiled calls remembered for repeated small inputs (a decoding loop's next token)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ._kernels import Direct, ids_within
from ._parallel import NO_POST
from ._views import (
    HALF,
    kernel_input,
    kernel_output,
    may_share,
    may_share_memory,
    merged,
    merging,
    on_kernel_types,
    on_views,
)

__all__ = ["IN_PLACE", "NEW", "DirectCalls", "is_offset", "read_ids"]

NEW = "new"
"""What a remembered allocating call writes into, in its key."""

IN_PLACE = "in place"
"""What a remembered in-place call writes into, in its key."""

_Order = Literal["C", "F"] | None
"""The memory order of a new output (None: ``np.empty_like``'s of the input)."""

_Found = tuple[Any, Callable[..., None], tuple[Any, ...], int, int | None]
"""How a new output is made (an ``_Order``; for a view of the caller's array,
that order, the array's shape and the axes back to it), then a ``Direct``
(``DirectCalls._find``)."""

_ROPE_ARGUMENTS = 4
"""How many arguments most RoPE loops take between ``out`` and the positions
(two tables, ``pairing``, ``shared``: ``rope_direct``), which a remembered
call then passes one by one: a decoding step's compiled call 0.1 us faster
(0.45 against 0.55 us for an empty loop's; the steps 0.2-8% faster, median
3.5%, on the AVX2 AMD EPYC machine, in one process alternating with the
starred call)."""

_INTP = np.dtype(np.intp)
"""The position ids' dtype in the compiled loops."""

_ID_SEQUENCES = (list, tuple)
"""The position ids besides ndarrays that remembered calls take, converted
as the checks convert them (``np.asarray``): a list of Python ints, say."""

_MOST_LAYOUTS = 64
"""Records kept at most; many layouts in turn clear them (a small cache)."""


class DirectCalls:
    """The compiled loop a checked call ran, by the layouts of its arrays.

    After a checked call, the loop it ran is remembered for calls of the same
    kind on arrays of the same layouts: the next such call skips the checks'
    slow path, the choice of loop and Numba's type dispatch, and is checked
    only for what can change between two such calls (the offset's or the
    ids' range; ``out``'s flags and overlap with ``x`` and the ids; the
    alignment of ``x`` and of the ids, whose loops were compiled for
    aligned arrays).  A record's
    key is ``x``'s shape, strides and dtype, then what the call writes
    into: ``NEW`` (a new output, laid out as ``np.empty_like(x)``),
    ``IN_PLACE`` (``x`` itself), the axes ``x`` is viewed in (a new output
    laid out as ``np.empty_like`` of the caller's array, below), or
    ``out``'s shape, strides and dtype (any
    ``out``: a slot of a KV cache as well as a fresh array; an ``out`` of
    another shape than ``x`` finds no record, and the checks refuse it); with position
    ids, their shape, strides and dtype last.  Inputs of more than 3 dims
    are remembered where their axes from the third on merge into one
    without copying (``merged``): the remembered call runs on such 3-D
    views; where they do not, the loop is looked for on the arrays
    themselves (RoPE runs some such layouts on views of its own,
    ``exchanged``).

    A layout that no call can be remembered for (its loop reads other
    tables) is remembered as such: finding that out takes tens of
    microseconds, which a repeated large call would otherwise pay every
    time (~40 us of a 300 us call on 8 MB).

    Pickles and copies as an empty record (compiled calls cannot be pickled;
    the copy remembers its own as it is used).
    """

    __slots__ = ("_last", "_records", "_refused")

    def __init__(self) -> None:
        self._records: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._refused: set[tuple[Any, ...]] = set()
        self._last: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None] = (None, None)

    def __reduce__(self) -> tuple[type[DirectCalls], tuple[()]]:
        return DirectCalls, ()

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def call(
        self,
        x: Any,
        out: np.ndarray | None,
        offset: Any,
        positions: Any = None,
        axes: tuple[int, ...] | None = None,
        ids: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """The result of the remembered call for ``x`` into ``out`` (None: a
        new output) at ``offset``, or with ``positions`` (position ids;
        ``offset`` then 0), or None where there is none or its conditions do
        not hold (then the caller takes the checked path, which also refuses
        what is wrong).  Remembered calls take an ndarray ``x``, an integer
        ``offset`` (Python's or numpy's), and position ids as an ndarray of
        any integer dtype, or a list or tuple of ints, read as the checks
        convert them.  Not a ``np.timedelta64``, which numpy counts among
        its integers and the checks refuse.

        ``axes``, if given, says that ``x`` (and ``out``) are the caller's
        arrays viewed as ``transpose(axes)`` (a batch-first input, say): a
        new output is then made as the checks make it for the caller's
        array, and returned in the caller's axes.  A view's own new output
        would differ in its strides along axes of length 1.

        ``ids``, if given, are ``positions`` as ``read_ids`` read them, as
        the loop reads them (the additive encodings' read them first, to
        tell their kind: ``(seq, batch)`` views of batch-first ids, say);
        otherwise they are read here."""
        # ``type(offset) is int`` first: a decoding step's offset, without a call.
        if type(x) is not np.ndarray or not (type(offset) is int or is_offset(offset)):
            return None
        shape = x.shape
        if out is None:
            key: tuple[Any, ...] = (shape, x.strides, x.dtype, NEW if axes is None else axes)
        elif out is x:
            key = (shape, x.strides, x.dtype, IN_PLACE)
        elif type(out) is np.ndarray:
            key = (shape, x.strides, x.dtype, out.shape, out.strides, out.dtype)
        else:
            return None
        where: int | np.integer | np.ndarray = offset
        if positions is None:
            record = self._record(key)
            if record is None or not 0 <= offset <= record[0]:
                return None
        else:
            if offset != 0:
                return None
            if ids is None:
                ids = read_ids(positions)
                if ids is None:
                    return None
            record = self._record((*key, ids.shape, ids.strides, ids.dtype))
            if record is None or not ids_within(ids, record[0]):
                return None
            if (
                out is not None
                and type(positions) is np.ndarray
                and positions.dtype is _INTP  # read as they are (``read_ids``): the caller's
                and may_share_memory(ids, out)
            ):
                return None  # ids where the call writes: the checks read a copy
            where = ids
        _, entry, args, length, order, dtype = record
        y: np.ndarray | None
        if out is x:
            if not x.flags.behaved:
                return None
            y = None
            result = x
        else:
            # Each flags read builds an object: x's is read once.
            x_flags = x.flags
            if not x_flags.aligned:
                return None
            if out is None and axes is None:
                y = np.empty_like(x, dtype) if order is None else np.empty(shape, dtype, order)
                result = y
            elif out is None:  # laid out as for the caller's array, x.transpose(back)
                order, made_shape, back = order
                if order is None:
                    result = np.empty_like(x.transpose(back), dtype)
                else:
                    result = np.empty(made_shape, dtype, order)
                y = result.transpose(axes)
            else:
                # Left to the checks: what they refuse, and an out within x's
                # bounds, which they tell apart exactly (``may_share``, inlined).
                flags = out.flags
                if not flags.behaved or (
                    not (flags.owndata and x_flags.owndata) and may_share_memory(x, out)
                ):
                    return None
                y = result = out
        if len(args) == _ROPE_ARGUMENTS:
            # Spelt out: Python builds a call with a starred argument among
            # others as a list, then a tuple.
            cos, sin, pairing, shared = args
            entry(x, y, cos, sin, pairing, shared, where, 0, length, NO_POST)
        else:
            entry(x, y, *args, where, 0, length, NO_POST)
        return result

    def remember(
        self,
        x: np.ndarray,
        out: np.ndarray,
        new: bool,
        where: int | np.ndarray,
        last: int,
        find: Callable[[np.ndarray, np.ndarray | None], Direct | None],
        axes: tuple[int, ...] | None = None,
        seq_axis: int = 1,
    ) -> None:
        """After a checked call of ``x`` into ``out`` (``x`` itself in place;
        ``new``: an output the call made) at ``where``, keep the loop
        ``find`` gives for the arrays the loop is handed: 3-D views of ``x``
        and of ``out`` (None in place), float16 in the kernels' storage
        types.  ``where`` is the call's offset (an int), or the position ids
        it read (native ``intp``, one per position): the record is then for
        ids of their shape and layout.  ``last`` is the largest offset the
        layer's tables cover for this sequence length (``x``'s axis
        ``seq_axis``: 1 for RoPE, 0 for the additive encodings); the record
        covers less where the loop reads a copy of the tables' first
        positions only (``Direct``).  A record for ids keeps the ids' stop
        (``last`` plus the sequence length), one for offsets its largest
        offset.  ``axes``, if given, says that ``x`` and
        ``out`` are views ``transpose(axes)`` of the caller's arrays, as
        ``call`` is then told.

        ``find`` costs tens of microseconds (Numba's ``typeof`` of each
        argument), so it is not asked again while a record for such calls
        covers ``last``, nor for what ``call`` never accepts (an ``out``
        within ``x``'s bounds: another view of its elements, written in
        place, or one among them; an unaligned ``out``, ``x`` or ids), nor for layouts
        refused before.  A record that covers less is looked for again
        after a checked call it could not have served (which grew the copy,
        or found it large enough for the call); not after one it could
        have (ids given as an ndarray subclass), which would find the same
        loop at every call.
        """
        in_place = out is x  # the loop compiled to write into x (see run_forward)
        ids = where if isinstance(where, np.ndarray) else None
        # The key as ``call`` builds it (there inline, on the decoding step's path).
        key: tuple[Any, ...] = (x.shape, x.strides, x.dtype)
        if new:
            key += (NEW if axes is None else axes,)
        else:
            key += (IN_PLACE,) if in_place else (out.shape, out.strides, out.dtype)
        if ids is not None:
            key += (ids.shape, ids.strides, ids.dtype)
        span = 0 if ids is None else x.shape[seq_axis]
        limit = last + span
        kept = self._records.get(key)
        if kept is not None and (kept[0] >= limit or _serves(kept[0], where)):
            return
        if key in self._refused:
            return
        if not new and not out.flags.behaved:  # never accepted by ``call``
            return
        if not x.flags.aligned or (ids is not None and not ids.flags.aligned):  # nor these
            return
        if not in_place and not new and may_share(x, out):
            return
        found = self._find(x, out, new, in_place, find, axes)
        if found is None:
            if len(self._refused) >= _MOST_LAYOUTS:
                self._refused.clear()
            self._refused.add(key)
            return
        if len(self._records) >= _MOST_LAYOUTS:
            self._records.clear()
        order, entry, args, length, covered = found
        limit = limit if covered is None else min(limit, covered + span)
        self._records[key] = (limit, entry, args, length, order, out.dtype)
        self._last = (None, None)

    def _record(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The record for ``key``, the last one found first: a decoding
        loop's steps find the same one, and comparing its key costs less
        than hashing this one (its dtype's hash is built at each call)."""
        last_key, record = self._last
        if key != last_key:
            record = self._records.get(key)
            if record is not None:
                self._last = (key, record)
        return record

    @staticmethod
    def _find(
        x: np.ndarray,
        out: np.ndarray,
        new: bool,
        in_place: bool,
        find: Callable[[np.ndarray, np.ndarray | None], Direct | None],
        axes: tuple[int, ...] | None,
    ) -> _Found | None:
        """How the remembered call makes a new output, and the loop to
        remember for ``x`` into ``out`` (``remember``'s arguments) as
        ``find`` gives it; or None where ``find`` finds none, or a new
        ``out`` is not laid out as ``np.empty_like`` of ``x``, which the
        remembered call makes.  How: the output's memory order (None: not
        ``np.empty``'s C or F layout, made by ``np.empty_like`` of ``x``;
        also None where the call makes none), or with ``axes`` that order
        for the caller's arrays, their shape, and the axes back to them."""
        order: Any = None
        if new:
            back = tuple(np.argsort(axes).tolist()) if axes is not None else None
            caller_x, made = (x, out) if back is None else (x.transpose(back), out.transpose(back))
            if not _same_steps(made, np.empty_like(caller_x, out.dtype)):
                return None
            order = _contiguous_order(made)
            if back is not None:
                order = (order, caller_x.shape, back)
        views: tuple[np.ndarray, ...] = (x, out)
        merge: Literal["C", "F"] | None = None
        found_views = merged(*views[: 1 if in_place else 2]) if x.ndim > 3 else None
        if found_views is not None:
            views, merge = found_views
        found = find(kernel_input(views[0]), None if in_place else kernel_output(views[1]))
        if found is None:
            return None
        entry, args, length, covered = found
        if HALF in (x.dtype, out.dtype):  # the entry takes float16 as the kernels store it
            entry = on_kernel_types(entry)
        if merge is not None:
            # Views, never copies: the record is only for arrays laid out as
            # those whose views ``merged`` found.
            entry = on_views(entry, merging(views[0].shape, merge))
        return order, entry, args, length, covered


def is_offset(offset: Any) -> bool:
    """Whether ``offset`` is an integer as the checks take it: Python's or
    numpy's, not a ``np.timedelta64`` (which numpy counts among its
    integers) nor a bool, a float, an array."""
    return type(offset) is int or (
        isinstance(offset, np.integer) and not isinstance(offset, np.timedelta64)
    )


def read_ids(positions: Any) -> np.ndarray | None:
    """Position ids as a remembered call reads them: an ndarray of any
    integer dtype, or a list or tuple of ints, as an aligned ``intp`` array
    (as the checks convert them); None for what remembered calls leave to
    the checks (other types, ndarray subclasses such as masked arrays, ids
    of no integer dtype, unaligned ids, ragged lists)."""
    ids = positions
    if type(ids) is not np.ndarray:
        if type(ids) not in _ID_SEQUENCES:
            return None
        try:
            ids = np.asarray(ids)
        except (TypeError, ValueError):  # ragged, say: the checks raise it again
            return None
    if ids.dtype is not _INTP:
        if ids.dtype.kind not in "iu":
            return None
        ids = ids.astype(np.intp)  # as ``resolve_positions`` converts them
    elif not ids.flags.aligned:
        return None
    return ids


def _serves(limit: int, where: int | np.ndarray) -> bool:
    """Whether a record whose ``limit`` is its largest offset, or for ids
    their stop, serves a call at ``where`` (an offset, or intp position
    ids): the range ``call`` checks."""
    if isinstance(where, np.ndarray):
        return bool(ids_within(where, limit))
    return 0 <= where <= limit


def _same_steps(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether arrays of one shape have the same strides, axes of length 1
    included: no loop steps along those, and numpy's contiguity flags
    ignore them, but callers see them (``np.empty_like`` of an array cut
    from a larger one may keep a long stride there)."""
    return a.strides == b.strides


def _contiguous_order(a: np.ndarray) -> _Order:
    """The memory order ``np.empty`` lays ``a`` out in, strides of axes of
    length 1 included ("C" where both do), or None."""
    for order, axes in (("C", reversed(range(a.ndim))), ("F", range(a.ndim))):
        step = a.itemsize
        for axis in axes:
            if a.strides[axis] != step:
                break
            step *= a.shape[axis]
        else:
            return order  # type: ignore[return-value]
    return None
