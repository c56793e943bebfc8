"""Compiled calls remembered for repeated small inputs (a decoding loop's next token)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ._kernels import Direct, ids_within
from ._parallel import NO_POST
from ._views import may_share, merged

__all__ = ["DirectCalls"]

_MOST_LAYOUTS = 64
"""Records kept at most; many layouts in turn clear them (a small cache)."""


class DirectCalls:
    """The compiled loop a checked call ran, by input layout.

    After a checked call, the loop it ran is remembered for inputs of the
    same shape, strides and dtype (and for in place, or not; with position
    ids, for ids of the same shape, strides and dtype): the next such call
    skips the checks' slow path, the choice of loop and Numba's type
    dispatch, and is checked only for what can change between two such
    inputs (the offset's or the ids' range, and ``out``).  A call into an
    ``out`` is remembered only where ``out`` is laid out as a new output
    would be (``np.empty_like`` of ``x``, in its memory order), since an
    allocating call then gets that layout; in place, whatever the layout of
    ``x`` (a key rotated where it stands in a cache: such records are for
    in-place calls only).  Inputs of more than 3 dims are remembered where
    their axes from the third on merge into one without copying
    (``merged``): the remembered call runs on such 3-D views; where they do
    not, the loop is looked for on the arrays themselves (RoPE runs some
    such layouts on views of its own, ``exchanged``).

    A layout that no call can be remembered for (its loop reads other
    tables, or ``out`` is not laid out as a new output) is remembered as
    such: finding that out takes a probe array of the output's size and
    tens of microseconds, which a repeated large call would otherwise pay
    every time (~40 us of a 300 us call on 8 MB).

    Pickles and copies as an empty record (compiled calls cannot be pickled;
    the copy remembers its own as it is used).
    """

    __slots__ = ("_records", "_refused")

    def __init__(self) -> None:
        self._records: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._refused: set[tuple[Any, ...]] = set()

    def __reduce__(self) -> tuple[type[DirectCalls], tuple[()]]:
        return DirectCalls, ()

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def call(
        self, x: np.ndarray, out: np.ndarray | None, where: int | np.ndarray
    ) -> np.ndarray | None:
        """The result of the remembered call for ``x`` (an ndarray) at
        ``where``, an integer offset or an ndarray of position ids, or None
        where there is none or its conditions do not hold (then the caller
        takes the checked path)."""
        shape = x.shape
        if isinstance(where, np.ndarray):
            key = (shape, x.strides, x.dtype, out is x, where.shape, where.strides, where.dtype)
            record = self._records.get(key)
            if record is None or not ids_within(where, record[3] + shape[1]):
                return None
        else:
            record = self._records.get((shape, x.strides, x.dtype, out is x))
            if record is None or not 0 <= where <= record[3]:
                return None
        order, dtype, layout, _, entry, args, length = record
        if out is None:
            y = np.empty_like(x, dtype) if order is None else np.empty(shape, dtype, order)
            entry(x, y, *args, where, 0, length, NO_POST)
            return y
        if out is x:
            if not x.flags.behaved:
                return None
            entry(x, None, *args, where, 0, length, NO_POST)
            return x
        if not _fits(out, x, layout):
            return None
        entry(x, out, *args, where, 0, length, NO_POST)
        return out

    def remember(
        self,
        x: np.ndarray,
        out: np.ndarray,
        last: int,
        find: Callable[[np.ndarray, np.ndarray | None], Direct | None],
        ids: np.ndarray | None = None,
    ) -> None:
        """After a checked call of ``x`` into ``out`` (``x`` itself in place),
        keep the loop ``find`` gives for the arrays the loop is handed: 3-D
        views of ``x`` and of ``out`` (None in place).  ``last`` is the
        largest offset the call's tables cover for this sequence length.
        ``ids``, if given, are the position ids the call read (native
        ``intp``, one per position): the record is then for ids of their
        shape and layout.

        ``find`` costs tens of microseconds (Numba's ``typeof`` of each
        argument), so it is not asked again while a record for such calls
        covers ``last``, nor for an ``out`` that is another view of ``x``'s
        elements (written in place, but never accepted by ``call``), nor
        for layouts of ``x`` and ``out`` refused before.
        """
        in_place = out is x  # the loop compiled to write into x (see run_forward)
        key: tuple[Any, ...] = (x.shape, x.strides, x.dtype, in_place)
        if ids is not None:
            key += (ids.shape, ids.strides, ids.dtype)
        kept = self._records.get(key)
        if kept is not None and kept[3] >= last:
            return
        if not in_place and may_share(x, out):
            return
        layout = (x.shape, out.strides, out.dtype)
        if (key, layout) in self._refused:
            return
        found = self._find(x, out, in_place, find)
        if found is None:
            if len(self._refused) >= _MOST_LAYOUTS:
                self._refused.clear()
            self._refused.add((key, layout))
            return
        if len(self._records) >= _MOST_LAYOUTS:
            self._records.clear()
        order, entry, args, length = found
        self._records[key] = (order, out.dtype, layout, last, entry, args, length)

    @staticmethod
    def _find(
        x: np.ndarray,
        out: np.ndarray,
        in_place: bool,
        find: Callable[[np.ndarray, np.ndarray | None], Direct | None],
    ) -> tuple[Literal["C", "F"] | None, Callable[..., None], tuple[Any, ...], int] | None:
        """The memory order of a new output (None: neither C nor F, made by
        ``np.empty_like`` of ``x``; None in place, where none is made) and
        the loop to remember for ``x`` into ``out`` (``remember``'s
        arguments), or None where ``out``, not ``x`` itself, is not laid out
        as a new output would be, or ``find`` finds none."""
        order: Literal["C", "F"] | None = None
        arrays: tuple[np.ndarray, ...] = (x,)
        if not in_place:
            new = np.empty_like(x, out.dtype)  # what an allocating call writes
            if not _same_steps(out, new):
                return None
            flags = new.flags
            order = "C" if flags.c_contiguous else "F" if flags.f_contiguous else None
            arrays = (x, out, new)
        views: tuple[np.ndarray, ...] = (x, out)
        merge: Literal["C", "F"] | None = None
        found_views = merged(*arrays) if x.ndim > 3 else None
        if found_views is not None:
            views, merge = found_views
        found = find(views[0], None if in_place else views[1])
        if found is None:
            return None
        entry, args, length = found
        if merge is not None:
            entry = _on_views(entry, views[0].shape, merge)
        return order, entry, args, length


def _on_views(
    entry: Callable[..., None], shape: tuple[int, ...], order: Literal["C", "F"]
) -> Callable[..., None]:
    """``entry`` for arrays of more than 3 dims: ``entry`` of their 3-D views
    of ``shape``, merged in ``order``.  Views, never copies: the record is
    only for arrays laid out as those whose views ``merged`` found."""

    def call(x: np.ndarray, out: np.ndarray | None, *rest: Any) -> None:
        entry(
            x.reshape(shape, order=order),
            None if out is None else out.reshape(shape, order=order),
            *rest,
        )

    return call


def _same_steps(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether arrays of one shape have the same strides along every axis
    longer than 1 (the others are never stepped along; numpy's contiguity
    flags, and so the compiled loops' types, ignore them too)."""
    return all(n <= 1 or p == q for n, p, q in zip(a.shape, a.strides, b.strides, strict=True))


def _fits(out: Any, x: np.ndarray, layout: tuple[Any, ...]) -> bool:
    """Whether ``out``, not ``x`` itself, is exactly the kind of array a
    remembered call writes: ``layout`` is its (shape, strides, dtype), the
    dtype the very object (cheaper to compare; an equal copy of it only
    takes the checked path); writeable and aligned (``behaved``); no
    overlap with ``x`` (what the checks would refuse, for that one layout)."""
    shape, strides, dtype = layout
    if not (
        type(out) is np.ndarray
        and out.dtype is dtype
        and out.strides == strides
        and out.shape == shape
    ):
        return False
    flags = out.flags  # read once (each read builds an object): ``may_share``, inlined
    return flags.behaved and (
        (flags.owndata and x.flags.owndata) or not np.may_share_memory(x, out)
    )
