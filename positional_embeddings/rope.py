"""Rotary position embeddings (RoPE) and ``neg_half``, as in PositionalEmbeddings.jl."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import (
    as_array,
    as_float_dtype,
    as_real,
    as_size,
    check_finite_angles,
    output_for,
    promote,
)
from ._kernels import rope_forward, rope_tables
from ._views import run_forward
from .frequencies import frequency_bands

__all__ = ["RoPE", "neg_half"]


def _check_head_size(head_size: Any) -> int:
    head_size = as_size(head_size, "head_size")
    if head_size % 2:
        raise ValueError(f"Head dimension should be multiple of 2, got {head_size}")
    return head_size


class RoPE:
    """Rotary position embeddings on Julia's (head_size, seq_len, heads*batch) layout.

    Parameters
    ----------
    head_size : int
        Size of each attention head; even (>= 0).
    seq_len : int
        Longest sequence the cached tables support (>= 0).
    base : real, default 10_000
        Base of the frequency progression (``theta_i = base^(-2i/head_size)``).
    scale : real, default 1.0
        Multiplies the angles (in float64, before rounding to ``T``).
    T : numpy float type, default ``np.float32``
        Table type: ``np.float16``, ``np.float32`` or ``np.float64`` (Julia's
        ``T=Float16/Float32/Float64``).

    Attributes
    ----------
    head_size : int
    cos_cached, sin_cached : numpy.ndarray
        Shape ``(head_size, seq_len)``, dtype ``T``, read-only.  Rows ``i`` and
        ``i + head_size/2`` hold the same angle ``T((theta_i * p) * scale)``.

    Raises
    ------
    TypeError
        Non-integer sizes, non-real ``base``/``scale``, an unsupported ``T``.
    ValueError
        Odd or negative ``head_size`` ("Head dimension should be multiple of
        2, got 7"), negative ``seq_len``, a negative ``base`` with
        ``head_size > 2``, angles that overflow to Inf (Julia's ``cos`` throws
        ``DomainError``).

    Notes
    -----
    Julia: ``RoPE(head_size, seq_len; base=10_000, scale=1.0, T=Float32)``.
    The tables are Julia's bit for bit: its own Float16/32/64 ``sin`` and
    ``cos`` are reproduced, not the C library's.  Julia's 3-argument
    constructor ``RoPE(head_size, cos_cached, sin_cached)`` is
    :meth:`RoPE.from_tables`.  Pairs are (h, h + head_size/2), the
    "rotate_half" layout of GPT-NeoX and Hugging Face LLaMA.

    Examples
    --------
    >>> import numpy as np
    >>> rope = RoPE(64, 1024)
    >>> rope.cos_cached.shape, rope.cos_cached.dtype
    ((64, 1024), dtype('float32'))
    >>> x = np.ones((64, 100, 256), dtype=np.float32)  # (head, seq, heads*batch)
    >>> rope(x).shape
    (64, 100, 256)
    """

    __slots__ = ("_kernel_tables", "cos_cached", "head_size", "sin_cached")

    head_size: int
    cos_cached: np.ndarray
    sin_cached: np.ndarray

    def __init__(
        self,
        head_size: int,
        seq_len: int,
        base: float = 10_000,
        scale: float = 1.0,
        *,
        T: Any = np.float32,
    ) -> None:
        head_size = _check_head_size(head_size)
        seq_len = as_size(seq_len, "seq_len")
        base = as_real(base, "base")
        scale = as_real(scale, "scale")
        dtype = as_float_dtype(T)
        theta = frequency_bands(head_size, base)
        with np.errstate(over="ignore", invalid="ignore"):
            longest = ((theta * max(seq_len - 1, 0)) * scale).astype(dtype)
        check_finite_angles(longest, "cos")
        cos = np.empty((head_size, seq_len), dtype=dtype, order="F")
        sin = np.empty_like(cos)
        storage = np.uint16 if dtype == np.float16 else dtype
        rope_tables(theta, scale, cos.view(storage), sin.view(storage))
        self._set_tables(head_size, cos, sin)

    @classmethod
    def from_tables(
        cls, head_size: int, cos_cached: Any, sin_cached: Any
    ) -> RoPE:
        """A RoPE with given tables: Julia's ``RoPE(head_size, cos_cached, sin_cached)``.

        Parameters
        ----------
        head_size : int
            Even, and equal to the tables' first dimension.
        cos_cached, sin_cached : array_like
            Same shape ``(head_size, max_seq_len)`` and the same float16/32/64
            dtype.  They are copied (the RoPE's tables are read-only).

        Raises
        ------
        TypeError, ValueError
            Tables of another rank, shape or dtype, or a head size that does
            not match them.  (Julia accepts a mismatched head size here and
            fails at the first call; this fails at once.)
        """
        head_size = _check_head_size(head_size)
        tables = []
        for name, table in (("cos_cached", cos_cached), ("sin_cached", sin_cached)):
            array = np.asarray(table)
            as_float_dtype(array.dtype)
            if array.ndim != 2 or array.shape[0] != head_size:
                raise ValueError(
                    f"{name} must have shape (head_size={head_size}, seq_len), "
                    f"got {array.shape}"
                )
            tables.append(np.array(array, order="F"))
        cos, sin = tables
        if cos.shape != sin.shape or cos.dtype != sin.dtype:
            raise ValueError(
                "cos_cached and sin_cached must have the same shape and dtype, got "
                f"{cos.shape} {cos.dtype} and {sin.shape} {sin.dtype}"
            )
        rope = cls.__new__(cls)
        rope._set_tables(head_size, cos, sin)
        return rope

    def _set_tables(self, head_size: int, cos: np.ndarray, sin: np.ndarray) -> None:
        for table in (cos, sin):
            table.flags.writeable = False
        self.head_size = head_size
        self.cos_cached = cos
        self.sin_cached = sin
        if cos.dtype == np.float16:  # kernels read exact float32 copies
            self._kernel_tables = (cos.astype(np.float32), sin.astype(np.float32))
        else:
            self._kernel_tables = (cos, sin)

    def __call__(self, x: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Rotate ``x``: Julia's ``rope(x)``.

        Parameters
        ----------
        x : array_like
            Shape ``(head_size, seq_len, ...)`` with 3 or more dims, seq_len up
            to the cached length; bool, integer or float16/32/64.  Not modified.
        out : numpy.ndarray, optional
            Where to write the result: shape of ``x``, the promoted dtype; may
            be ``x`` itself (in place) but not overlap it otherwise.

        Returns
        -------
        numpy.ndarray
            ``x * cos + neg_half(x) * sin`` (tables cut to seq_len, broadcast
            over the axes after the second), dtype Julia's
            ``promote_type(eltype(x), T)`` (bool/integer inputs take ``T``), in
            ``x``'s memory order.

        Raises
        ------
        TypeError
            Unsupported dtype of ``x``; ``out`` of the wrong type or dtype.
        ValueError
            Fewer than 3 dims; "Head dimension must match, expected 64, got
            32"; "Sequence length exceeds maximum length"; a bad ``out``.
        """
        x = as_array(x, "x", 3)
        head_size, seq_len = x.shape[0], x.shape[1]
        if head_size != self.head_size:
            raise ValueError(
                f"Head dimension must match, expected {self.head_size}, got {head_size}"
            )
        if seq_len > self.cos_cached.shape[1]:
            raise ValueError(
                "Sequence length exceeds maximum length: x has seq_len "
                f"{seq_len}, the tables hold {self.cos_cached.shape[1]}"
            )
        out = output_for(x, promote(x.dtype, self.cos_cached.dtype), out)
        return run_forward(rope_forward, x, out, *self._kernel_tables)

    def __repr__(self) -> str:
        return (
            f"RoPE(head_size={self.head_size}, seq_len={self.cos_cached.shape[1]}, "
            f"T=np.{self.cos_cached.dtype})"
        )


def neg_half(x: Any, dim: int = 0) -> np.ndarray:
    """Negate-and-swap the two halves of ``x`` along axis ``dim``.

    With ``n = x.shape[dim]`` and ``d2 = n // 2``, the result is
    ``concatenate([-x[d2:n], x[:d2]], axis=dim)``: for odd ``n`` the negated
    block is the longer one.

    Parameters
    ----------
    x : array_like
        Any numeric array with at least one dimension; not modified.
    dim : int, default 0
        0-based axis, negative axes allowed (numpy convention).  Julia's
        ``neg_half(x, k)`` is ``neg_half(x, k - 1)`` here.

    Returns
    -------
    numpy.ndarray
        Same shape and memory order as ``x``; same dtype, except bool, which
        becomes int64 (Julia's ``-true == -1``).  Integers negate with
        wraparound, as in Julia.

    Examples
    --------
    >>> neg_half(np.array([1.0, 2.0, 3.0, 4.0]))
    array([-3., -4.,  1.,  2.])
    >>> neg_half(np.array([1, 2, 3]))
    array([-2, -3,  1])
    """
    x = np.asarray(x)
    if x.dtype.kind not in "biufc":
        raise TypeError(f"x must have a numeric dtype, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension, got a 0-d array")
    dim = as_size(dim, "dim", minimum=-x.ndim)
    if dim >= x.ndim:
        raise ValueError(
            f"dim must be in [{-x.ndim}, {x.ndim - 1}] for a {x.ndim}-d array "
            f"(0-based; Julia's dim=k is dim=k-1 here), got {dim}"
        )
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    n = x.shape[dim]
    d2 = n // 2

    def along(part: slice) -> tuple[slice, ...]:
        index = [slice(None)] * x.ndim
        index[dim] = part
        return tuple(index)

    out = np.empty_like(x, order="K")
    np.negative(x[along(slice(d2, n))], out=out[along(slice(0, n - d2))])
    out[along(slice(n - d2, n))] = x[along(slice(0, d2))]
    return out
