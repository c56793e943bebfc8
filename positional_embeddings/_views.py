"""The views kernels take: float16 storage types and (a, b, batch) 3-D shapes.

RoPE and AbsolutePE both work on arrays of 3 or more dims whose axes after
the second are a plain batch.  Kernels see them as 3-D views; collapsing the
trailing axes never copies (when the strides do not allow a view, the kernel
runs once per 3-D slice instead).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np

__all__ = [
    "F16_RECORD",
    "HALF",
    "collapsed",
    "grown_copy",
    "kernel_input",
    "kernel_output",
    "may_share",
    "may_share_memory",
    "merged",
    "merging",
    "on_kernel_types",
    "on_views",
    "owned",
    "read_only",
    "reshaped_in_place",
    "run_forward",
    "same_elements",
    "viewed",
]

F16_RECORD = np.dtype([("bits", "<u2")])
"""How float16 arrays are passed to kernels: the same bytes under a record dtype."""

HALF = np.dtype(np.float16)
"""The dtype that kernels take in other storage types (``kernel_input``, ``kernel_output``)."""


def kernel_input(x: np.ndarray) -> np.ndarray:
    """float16 travels as a record of its bits (Numba has no CPU float16)."""
    return x.view(F16_RECORD) if x.dtype == HALF else x


def kernel_output(out: np.ndarray) -> np.ndarray:
    """float16 results are written as their uint16 bits."""
    return out.view(np.uint16) if out.dtype == HALF else out


def reshaped_in_place(
    a: np.ndarray, shape: tuple[int, ...], order: Literal["C", "F"]
) -> np.ndarray:
    """``a`` reshaped to ``shape`` in ``order`` as a view, made by setting the
    shape of a view of ``a`` (in F order, of its axes reversed), which numpy
    refuses (``AttributeError``) where the strides would need a copy: the
    no-copy reshape of numpy before 2.1, whose ``reshape`` has no ``copy``."""
    if order == "F":
        return reshaped_in_place(a.T, shape[::-1], "C").T
    view = a.view()
    view.shape = shape
    return view


def _reshaped_without_copy(
    a: np.ndarray, shape: tuple[int, ...], order: Literal["C", "F"]
) -> np.ndarray:
    """``np.reshape(..., copy=False)`` (numpy 2.1 and later): raises
    ``ValueError`` where the strides would need a copy."""
    return np.reshape(a, shape, order=order, copy=False)


def _reshape_takes_copy() -> bool:
    """Whether this numpy's ``reshape`` takes ``copy`` (2.1 and later)."""
    try:
        np.reshape(np.empty(1), (1,), copy=False)
    except TypeError:  # numpy before 2.1
        return False
    return True


_reshaped = _reshaped_without_copy if _reshape_takes_copy() else reshaped_in_place


def viewed(a: np.ndarray, shape: tuple[int, ...], order: Literal["C", "F"]) -> np.ndarray | None:
    """``a`` reshaped to ``shape`` in ``order`` without copying, or None if
    the strides forbid it."""
    try:
        return _reshaped(a, shape, order)
    except (ValueError, AttributeError):
        return None


def collapsed(a: np.ndarray, order: Literal["C", "F"]) -> np.ndarray | None:
    """``a`` with its axes from the third on merged into one, without copying,
    or None if the strides forbid it."""
    return viewed(a, (*a.shape[:2], -1), order)


def merged(
    *arrays: np.ndarray,
) -> tuple[tuple[np.ndarray, ...], Literal["C", "F"]] | None:
    """3-D views of arrays shaped (n0, n1, rest...), their axes from the third
    on merged into one without copying in the same order for every array
    (``"C"`` tried first), with that order; None if their strides allow
    neither.  Whether they merge depends only on shapes and strides: arrays
    laid out alike merge alike, so later ones can simply be reshaped."""
    orders: tuple[Literal["C", "F"], ...] = ("C", "F")
    for order in orders:
        views = [collapsed(a, order) for a in arrays]
        if all(v is not None for v in views):
            return tuple(v for v in views if v is not None), order
    return None


def merging(shape: tuple[int, ...], order: Literal["C", "F"]) -> Callable[[np.ndarray], np.ndarray]:
    """The function viewing arrays laid out as those ``merged`` viewed as
    ``shape``, their axes merged in ``order``: a view, never a copy, for
    such arrays (``reshape`` would copy others).

    Spelt without ``reshape``'s ``order`` keyword, whose parsing alone costs
    0.28 us (on the AMD machine, of a 4 us decoding step): in F order, as
    the C-order reshape of the array with its axes reversed, reversed back.
    """
    if order == "C":

        def merge(a: np.ndarray) -> np.ndarray:
            return a.reshape(shape)

        return merge
    reverse = shape[::-1]

    def merge_reversed(a: np.ndarray) -> np.ndarray:
        return a.T.reshape(reverse).T

    return merge_reversed


def on_views(
    entry: Callable[..., None], view: Callable[[np.ndarray], np.ndarray]
) -> Callable[..., None]:
    """``entry(x, out, *rest)`` called on ``view(x)`` and ``view(out)``
    (``out`` None stays None): a remembered loop for arrays that it runs on
    as views (``merging``'s, a transpose)."""

    def call(x: np.ndarray, out: np.ndarray | None, *rest: Any) -> None:
        entry(view(x), None if out is None else view(out), *rest)

    return call


def on_kernel_types(entry: Callable[..., None]) -> Callable[..., None]:
    """``entry(x, out, *rest)`` called on the views of ``x`` and ``out``
    that kernels take (``kernel_input``, ``kernel_output``; ``out`` None,
    in place, stays None): a remembered loop of float16 arrays."""

    def call(x: np.ndarray, out: np.ndarray | None, *rest: Any) -> None:
        entry(kernel_input(x), None if out is None else kernel_output(out), *rest)

    return call


def _three_d_views(*arrays: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """Matching 3-D views of arrays shaped (n0, n1, rest...) that cover them once.

    The trailing axes are merged in the same order for every array when
    their strides allow (``merged``); otherwise the views are the 3-D slices
    over every index of the axes after the third.
    """
    if arrays[0].ndim == 3:
        yield arrays
        return
    views = merged(*arrays)
    if views is not None:
        yield views[0]
        return
    for index in itertools.product(*(range(n) for n in arrays[0].shape[3:])):
        where: tuple[Any, ...] = (Ellipsis, *index)
        yield tuple(a[where] for a in arrays)


def grown_copy(
    kept: np.ndarray | None, table: np.ndarray, stop: int, order: Literal["C", "F"]
) -> np.ndarray:
    """A read-only copy of ``table``'s first positions (axis 1) in ``order``,
    covering at least ``0 .. stop - 1``: ``kept`` if it already does, else a
    new one of at least twice ``kept``'s positions (up to the table's length),
    so that a decoding loop copies O(log n) times."""
    if kept is not None and kept.shape[1] >= stop:
        return kept
    length = max(stop, 2 * (0 if kept is None else kept.shape[1]))
    copy = np.array(table[:, : min(length, table.shape[1])], order=order)
    copy.flags.writeable = False
    return copy


may_share_memory: Callable[[np.ndarray, np.ndarray], bool] = getattr(
    np.may_share_memory, "_implementation", np.may_share_memory
)
"""``np.may_share_memory`` without numpy's ``__array_function__`` dispatch,
which only ndarray subclasses and other array types need: the checks take
exact ndarrays.  120-150 ns less, of a 2.5 us decoding step into a cache."""


def owned(table: np.ndarray) -> np.ndarray:
    """``table`` where it owns its memory, else a copy in its memory order:
    an unpickled table may view a buffer the caller keeps and can write
    (pickle's out-of-band buffers, protocol 5), which ``read_only`` would
    not stop."""
    return table if table.base is None else table.copy(order="K")


def read_only(table: np.ndarray) -> np.ndarray:
    """``table`` made read-only, and a view of it through a read-only
    buffer, whose WRITEABLE flag numpy refuses to set back, nor that of its
    ``base`` (the buffer; a plain view's base was ``table``, whose flag can
    be set back): the tables a layer keeps copies of (packed, float32,
    position-major) must not change under them.  The buffer's owner,
    ``table``, stays reachable (``base.obj``), and code that sets its flag
    back on purpose goes around this guard, against mistakes only: memory
    whose owner can never be written (``bytes``) would cost a copy of each
    table (about 0.35 s for a 64 MB one on the AVX2 machine).  Every table
    the loops read is read-only (a view, where the layer's own table is
    trainable): Numba's types carry the flag, and a writeable table would
    compile each loop again."""
    table.flags.writeable = False
    return np.asarray(table.data)


def same_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` (of one shape) are the same elements in the
    same places: ``out`` written in place, even as another view of ``x``
    (whose strides along an axis of length 1 may differ: no step is taken
    along it)."""
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.dtype.itemsize == b.dtype.itemsize
        and all(n == 1 or p == q for n, p, q in zip(a.shape, a.strides, b.strides, strict=True))
    )


def may_share(x: np.ndarray, out: np.ndarray) -> bool:
    """``np.may_share_memory``, skipped when both own their memory (a fresh
    output, a user's array): such arrays never share it."""
    return not (x.flags.owndata and out.flags.owndata) and may_share_memory(x, out)


def run_forward(
    forward: Callable[..., None],
    x: np.ndarray,
    out: np.ndarray,
    *args: Any,
    columns: np.ndarray | None = None,
    columns_lack: int = 0,
) -> np.ndarray:
    """Run ``forward(x3, out3, *args)`` over 3-D views of ``x`` and ``out``; return ``out``.

    ``out`` shares no element with ``x`` (it may lie among them, as another
    batch column or slot of one array) or is the same elements
    (``same_elements``); the callers check.  In place, ``out3`` is None,
    which the loops take to mean "write into ``x3``" and compile to
    vectorised loops (``_kernels._written``; float16, read as records of its
    bits, is written through a uint16 view of them); not when the two differ
    in dtype (integers rewritten as floats of the same size) or ``x`` is a
    read-only view, where they stay two arrays.
    ``columns``, if given, is an array shaped like ``x`` without its axis
    ``columns_lack`` (0 or 1: RoPE's ids lack the head axis, those of the
    additive encodings the features axis), one value per sequence position
    and batch column; its matching 2-D views are passed as the last
    argument.
    """
    x_kernel, out_kernel = kernel_input(x), kernel_output(out)
    # ``same_elements`` reads both arrays' interfaces (1.8 us); ``may_share`` first
    # (0.09 us) passes over a separate out, a new one above all.
    in_place = (
        x.dtype == out.dtype
        and (out is x or (may_share(x, out) and same_elements(x, out)))
        and x.flags.writeable
    )
    if columns is None and x.ndim == 3:
        forward(x_kernel, None if in_place else out_kernel, *args)
        return out
    arrays: tuple[np.ndarray, ...] = (x_kernel,) if in_place else (x_kernel, out_kernel)
    if columns is not None:
        arrays += (np.expand_dims(columns, columns_lack),)
    for views in _three_d_views(*arrays):
        out3 = None if in_place else views[1]
        column_views = () if columns is None else (views[-1][(slice(None),) * columns_lack + (0,)],)
        forward(views[0], out3, *args, *column_views)
    return out
