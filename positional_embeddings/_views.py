"""The views kernels take: float16 storage types and (a, b, batch) 3-D shapes.

RoPE and AbsolutePE both work on arrays of 3 or more dims whose axes after
the second are a plain batch.  Kernels see them as 3-D views; collapsing the
trailing axes never copies (when the strides do not allow a view, the kernel
runs once per 3-D slice instead).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from ._kernels import F16_RECORD

__all__ = ["run_forward"]

_F16 = np.dtype(np.float16)


def _kernel_input(x: np.ndarray) -> np.ndarray:
    """float16 travels as a record of its bits (Numba has no CPU float16)."""
    return x.view(F16_RECORD) if x.dtype == _F16 else x


def _kernel_output(out: np.ndarray) -> np.ndarray:
    """float16 results are written as their uint16 bits."""
    return out.view(np.uint16) if out.dtype == _F16 else out


def _collapsed(a: np.ndarray, order: str) -> np.ndarray | None:
    """``a`` as (n0, n1, rest) without copying, or None if the strides forbid it."""
    try:
        return np.reshape(a, (a.shape[0], a.shape[1], -1), order=order, copy=False)
    except ValueError:
        return None


def _three_d_pairs(
    x: np.ndarray, out: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs of matching 3-D views of ``x`` and ``out`` that cover them once."""
    if x.ndim == 3:
        yield x, out
        return
    for order in ("C", "F"):
        x3, out3 = _collapsed(x, order), _collapsed(out, order)
        if x3 is not None and out3 is not None:
            yield x3, out3
            return
    for index in itertools.product(*(range(n) for n in x.shape[3:])):
        yield x[(Ellipsis, *index)], out[(Ellipsis, *index)]


def run_forward(
    kernel: Callable[..., None], x: np.ndarray, out: np.ndarray, *tables: np.ndarray
) -> np.ndarray:
    """Run ``kernel(x3, *tables, out3)`` over 3-D views of ``x`` and ``out``; return ``out``."""
    for x3, out3 in _three_d_pairs(_kernel_input(x), _kernel_output(out)):
        kernel(x3, *tables, out3)
    return out
