"""Rotary position embeddings (RoPE) and ``neg_half``, as in PositionalEmbeddings.jl."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import (
    as_array,
    as_axis,
    as_flag,
    as_float_dtype,
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
from ._direct import DirectCalls
from ._kernels import (
    exchanged,
    packed_tables,
    rope_direct,
    rope_forward,
    rope_tables,
    widened_f16,
)
from ._views import grown_copy, may_share_memory, owned, read_only, run_forward
from .frequencies import frequency_bands

__all__ = ["RoPE", "neg_half"]


def _check_head_size(head_size: Any, interleaved: bool) -> int:
    head_size = as_size(head_size, "head_size")
    if head_size % 2 and not interleaved:
        raise ValueError(f"Head dimension should be multiple of 2, got {head_size}")
    return head_size


class RoPE:
    """Rotary position embeddings on Julia's (head_size, seq_len, heads*batch) layout.

    Parameters
    ----------
    head_size : int
        Size of each attention head; even (>= 0), or any size >= 0 with
        ``interleaved=True``.
    seq_len : int
        Number of positions the cached tables hold (>= 0).
    base : real, default 10_000
        Base of the frequency progression (``theta_i = base^(-2i/head_size)``).
    scale : real, default 1.0
        Multiplies the angles (in float64, before rounding to ``T``).
    T : numpy float type, default ``np.float32``
        Table type: ``np.float16``, ``np.float32`` or ``np.float64`` (Julia's
        ``T=Float16/Float32/Float64``).
    interleaved : bool, default False
        Opt-in, beyond Julia: rotate adjacent pairs (2i, 2i+1) as RoFormer,
        GPT-J and Meta's LLaMA checkpoints do, instead of Julia's (h, h +
        head_size/2) ("rotate_half", GPT-NeoX, Hugging Face).  An odd head
        size is then allowed: its last channel passes through unchanged.

    Attributes
    ----------
    head_size : int
        Channels per head.
    interleaved : bool
        Whether channels pair as (2i, 2i+1).
    cos_cached : numpy.ndarray
        The cos table, as ``sin_cached``.
    sin_cached : numpy.ndarray
        Shape ``(head_size, seq_len)``, dtype ``T``, read-only.  Row ``h``
        holds the cos/sin applied to channel ``h``: the angle
        ``T((theta_i * p) * scale)`` of its pair ``i`` (rows ``i`` and ``i +
        head_size/2``, or ``2i`` and ``2i+1`` when interleaved).

    Raises
    ------
    TypeError
        Non-integer sizes, non-real ``base``/``scale``, an unsupported ``T``.
    ValueError
        Odd head size without ``interleaved`` ("Head dimension should be
        multiple of 2, got 7"); negative sizes; a negative ``base`` with
        ``head_size > 2``; angles that overflow to Inf (Julia's ``cos``
        throws ``DomainError``).

    Notes
    -----
    Julia: ``RoPE(head_size, seq_len; base=10_000, scale=1.0, T=Float32)``.
    The tables are Julia's bit for bit: its own Float16/32/64 ``sin`` and
    ``cos`` are reproduced, not the C library's.  Julia's 3-argument
    constructor ``RoPE(head_size, cos_cached, sin_cached)`` is
    :meth:`RoPE.from_tables`.

    The tables are stored column by column (F order, as Julia stores
    them), which the loops with the head axis innermost, or the positions
    outermost (one or two positions; the seq axis outermost in memory),
    read along the head.  The others, in C order (the batch axis
    innermost, or the sequence with a single batch column), read each
    pair's table rows along the positions, from C-order copies of the
    tables, kept for the next call and covering the positions used so far
    (grown by doubling: at most the tables' memory again).

    The fields are read-only, as those of Julia's immutable struct:
    assigning one raises ``AttributeError`` (other tables:
    :meth:`from_tables`).

    Examples
    --------
    >>> import numpy as np
    >>> rope = RoPE(64, 1024)
    >>> rope.cos_cached.shape, rope.cos_cached.dtype
    ((64, 1024), dtype('float32'))
    >>> x = np.ones((64, 100, 256), dtype=np.float32)  # (head, seq, heads*batch)
    >>> rope(x).shape
    (64, 100, 256)
    >>> step = rope(x[:, :1], offset=100)  # the token at position 100 (KV-cache decoding)
    >>> bool(np.array_equal(step, rope(np.ones((64, 101, 256), np.float32))[:, 100:]))
    True
    """

    __slots__ = (
        "_backward_direct",
        "_backward_sin",
        "_cos_cached",
        "_direct",
        "_head_size",
        "_interleaved",
        "_kernel_tables",
        "_packed",
        "_pairing",
        "_position_rows",
        "_shared",
        "_sin_cached",
    )

    def __init__(
        self,
        head_size: int,
        seq_len: int,
        base: float = 10_000,
        scale: float = 1.0,
        *,
        T: Any = np.float32,
        interleaved: bool = False,
    ) -> None:
        interleaved = as_flag(interleaved, "interleaved")
        head_size = _check_head_size(head_size, interleaved)
        seq_len = as_size(seq_len, "seq_len")
        base = as_real(base, "base")
        scale = as_real(scale, "scale")
        dtype = as_float_dtype(T)
        holdable((head_size, seq_len), dtype, "RoPE's tables")
        theta = frequency_bands(head_size, base)
        with np.errstate(over="ignore", invalid="ignore"):
            longest = ((theta * max(seq_len - 1, 0)) * scale).astype(dtype)
        check_finite_angles(longest, "cos", "positions × frequencies × scale")
        cos = np.empty((head_size, seq_len), dtype=dtype, order="F")
        sin = np.empty_like(cos)
        storage = np.uint16 if dtype == np.float16 else dtype
        pairing = _pairing(head_size, interleaved)
        rope_tables(theta, scale, cos.view(storage), sin.view(storage), pairing)
        self._set_tables(head_size, cos, sin, interleaved, shared=True)

    @classmethod
    def from_tables(
        cls, head_size: int, cos_cached: Any, sin_cached: Any, *, interleaved: bool = False
    ) -> RoPE:
        """A RoPE with given tables: Julia's ``RoPE(head_size, cos_cached, sin_cached)``.

        Parameters
        ----------
        head_size : int
            Equal to the tables' first dimension; even unless ``interleaved``.
        cos_cached, sin_cached : array_like
            Same shape ``(head_size, max_seq_len)`` and the same float16/32/64
            dtype; row ``h`` is applied to channel ``h``.  They are copied (the
            RoPE's tables are read-only).  With an odd interleaved head the
            last channel has no partner and passes through unchanged: its
            rows must be cos 1 and sin 0, as ``RoPE`` makes them.
        interleaved : bool, default False
            Pair channels (2i, 2i+1) instead of (h, h + head_size/2).

        Raises
        ------
        TypeError
            Tables of a dtype other than float16/32/64, or of two dtypes
            (Julia's ``RoPE{T, A}`` takes two tables of one type: a
            ``MethodError``).
        ValueError
            Tables of another rank or shape, or a head size that does not
            match them.  (Julia accepts a mismatched head size here and
            fails at the first call; this fails at once.)  An odd interleaved
            head's last rows other than cos 1 and sin 0.
        """
        head_size, cos, sin, dtype, interleaved = _checked_tables(
            head_size, cos_cached, sin_cached, interleaved
        )
        # Checked, then copied: the copies are the layer's own.
        cos, sin = (np.array(table, dtype, order="F") for table in (cos, sin))
        rope = cls.__new__(cls)
        rope._set_tables(head_size, cos, sin, interleaved, shared=None)
        return rope

    # Julia's RoPE is an immutable struct: its fields are read, never assigned
    # (the tables the kernels read, and what is kept of them, follow from them).

    @property
    def head_size(self) -> int:
        """Channels per head, the length of the tables' first axis."""
        return self._head_size

    @property
    def interleaved(self) -> bool:
        """Whether channels pair as (2i, 2i+1) instead of (h, h + head_size/2)."""
        return self._interleaved

    @property
    def cos_cached(self) -> np.ndarray:
        """The cos table, (head_size, seq_len), read-only."""
        return self._cos_cached

    @property
    def sin_cached(self) -> np.ndarray:
        """The sin table, (head_size, seq_len), read-only."""
        return self._sin_cached

    def _set_tables(
        self,
        head_size: int,
        cos: np.ndarray,
        sin: np.ndarray,
        interleaved: bool,
        shared: bool | None,
    ) -> None:
        """Keep the tables; ``shared`` is True when they are known to hold equal
        rows for the two channels of every pair (built here), None to check
        (the half split only: interleaved pairs always read both rows)."""
        cos, sin = read_only(cos), read_only(sin)
        self._head_size = head_size
        self._interleaved = interleaved
        self._cos_cached = cos
        self._sin_cached = sin
        self._pairing = _pairing(head_size, interleaved)
        # Kernels read float16 tables as exact float32 copies, read-only as the
        # float32 tables are: Numba's types tell the two apart, so a writeable
        # copy would compile every loop again for what float32 tables compiled.
        self._kernel_tables = tuple(
            read_only(widened_f16(table)) if table.dtype == np.float16 else table
            for table in (cos, sin)
        )
        if interleaved:
            # Adjacent partner rows: reading both makes one vector load that the
            # compiler splits with shuffles; every other row alone took gathers
            # (Julia's order 1.8-1.9x slower).
            shared = None
        elif shared is None and _partner_rows_equal(self._kernel_tables, self._pairing):
            shared = True
        # The kernels' marker: with equal partner rows each pair reads one row of each table.
        self._shared = shared
        self._backward_sin: np.ndarray | None = None
        self._direct = DirectCalls()
        self._backward_direct = DirectCalls()
        self._position_rows: dict[int, np.ndarray] = {}
        self._packed: dict[tuple[int, int], np.ndarray] = {}

    def __call__(
        self,
        x: Any,
        out: np.ndarray | None = None,
        *,
        offset: int = 0,
        positions: Any = None,
    ) -> np.ndarray:
        """Rotate ``x``: Julia's ``rope(x)``.

        Parameters
        ----------
        x : array_like
            Shape ``(head_size, seq_len, ...)`` with 3 or more dims; bool,
            integer or float16/32/64.  Not modified.
        out : numpy.ndarray, optional
            Where to write the result: shape of ``x``, the promoted dtype; may
            be ``x`` itself (in place) but not overlap it otherwise.
        offset : int, default 0
            Opt-in, beyond Julia: position of ``x[:, 0]``; the sequence
            occupies positions ``offset .. offset + seq_len - 1`` (KV-cache
            decoding: one new token at position ``p`` is ``offset=p``).
        positions : array_like of int, optional
            Opt-in, beyond Julia: explicit position ids, shape ``(seq_len,)``
            (one per sequence position) or ``x.shape[1:]`` (one per position
            and batch column).  Excludes ``offset``.

        Returns
        -------
        numpy.ndarray
            ``x * cos + rotate(x) * sin`` (tables at each position, broadcast
            over the axes after the second), dtype Julia's
            ``promote_type(eltype(x), T)`` (bool/integer inputs take ``T``), in
            ``x``'s memory order.  ``rotate`` is Julia's ``neg_half`` (or, when
            interleaved, ``(x0, x1) -> (-x1, x0)`` per pair).

        Raises
        ------
        TypeError
            Unsupported dtype of ``x``; non-integer ``offset``/``positions``;
            ``out`` of the wrong type or dtype.
        ValueError
            Fewer than 3 dims; "Head dimension must match, expected 64, got
            32"; "Sequence length exceeds maximum length" (``seq_len`` plus
            ``offset`` beyond the tables); "positions must lie in [0, L)"
            (ids beyond the tables' length ``L``); a bad ``out``.
        """
        y = self._direct.call(x, out, offset, positions)
        if y is not None:
            return y
        return self._apply(x, out, offset, positions, self._kernel_tables, self._direct)

    def backward(
        self,
        dy: Any,
        out: np.ndarray | None = None,
        *,
        offset: int = 0,
        positions: Any = None,
    ) -> np.ndarray:
        """Vector-Jacobian product of the forward pass: the gradient with respect to ``x``.

        The forward pass is linear in ``x`` with a block-rotation matrix, so
        its VJP is the transposed rotation (by ``-theta``):
        ``dx[h1] = dy[h1]*cos[h1] + dy[h2]*sin[h2]``,
        ``dx[h2] = dy[h2]*cos[h2] - dy[h1]*sin[h1]`` for every pair.  Each
        product and sum is rounded once, as in the forward pass.

        Parameters
        ----------
        dy : array_like
            Gradient of the output, shaped like the forward pass's ``x``.
        out, offset, positions
            As for the forward pass (``out`` may be ``dy``).

        Returns
        -------
        numpy.ndarray
            ``dx``, with the forward pass's dtype rules.

        Notes
        -----
        Julia has no explicit backward; Zygote differentiates the broadcast
        to the same formula.  PyTorch: ``torch.autograd.grad`` of
        ``x * cos + rotate_half(x) * sin``.
        """
        dx = self._backward_direct.call(dy, out, offset, positions)
        if dx is not None:
            return dx
        if self._backward_sin is None:
            self._backward_sin = _backward_sin(self._kernel_tables[1], self._pairing)
        tables = (self._kernel_tables[0], self._backward_sin)
        return self._apply(dy, out, offset, positions, tables, self._backward_direct, gradient=True)

    def _apply(
        self,
        x: Any,
        out: np.ndarray | None,
        offset: int,
        positions: Any,
        tables: tuple[np.ndarray, ...],
        direct: DirectCalls,
        gradient: bool = False,
    ) -> np.ndarray:
        """Check, allocate, rotate by ``tables``; the call leaves its loop to
        ``direct``, the record of calls by these tables, for the next input
        of the same layout (the fast path of ``__call__`` and ``backward``),
        unless it read ids per position and batch column of more than one
        batch axis.  A ``gradient`` (``dy`` in errors) of integers is
        rotated in its promoted float type."""
        name = "dy" if gradient else "x"
        x = as_array(x, name, 3)
        head_size, seq_len = x.shape[0], x.shape[1]
        if head_size != self.head_size:
            raise ValueError(
                f"Head dimension must match, expected {self.head_size}, got {head_size}"
            )
        new = out is None
        out = output_for(x, promote(x.dtype, self.cos_cached.dtype), out, name)
        # After the output, which fails at once where no memory could hold
        # it, before ids as many as its positions are read.
        where = resolve_positions(
            seq_len, x.shape[1:], self.cos_cached.shape[1], offset, positions, name
        )
        if gradient and x.dtype.kind in "biu":
            # The loop negates a partner channel and the sin table: in an
            # integer type that negation wraps (uint8 1 to 255, int8 -128 to
            # itself), so integer gradients take their promoted float type
            # first, which the products would convert them to anyway (beyond
            # float16's range to infinities, silently, as the forward pass).
            with np.errstate(over="ignore"):
                x = x.astype(out.dtype, order="K")
        else:
            x = in_machine_order(x)
        if isinstance(where, np.ndarray) and may_share_memory(where, out):
            # Ids where the call writes (x's memory, in place): read before
            # the loop writes over them, as numpy reads such an input.
            where = where.copy()
        args = (*tables, self._pairing, self._shared, self._along_positions, self._packed_tables)
        ids = where if isinstance(where, np.ndarray) else None
        views = exchanged(x, out, where)
        if views is not None:  # one loop for all batch axes, which may not merge
            x_view, out_view, kernel_positions = views
            run_forward(rope_forward, x_view, out_view, *args, kernel_positions)
        elif ids is not None and ids.ndim > 1:
            run_forward(rope_forward, x, out, *args, columns=ids)
        else:
            run_forward(rope_forward, x, out, *args, where)
        one_batch_axis = x.ndim == 3 or ids is None or ids.ndim == 1
        if one_batch_axis:
            direct.remember(
                x,
                out,
                new,
                where,
                self.cos_cached.shape[1] - seq_len,
                lambda view, kernel_out: rope_direct(
                    view,
                    kernel_out,
                    tables[0],
                    tables[1],
                    self._pairing,
                    self._shared,
                    self._along_positions,
                    self._packed_tables,
                    where,
                ),
            )
        return out

    def _along_positions(self, table: np.ndarray, stop: int) -> np.ndarray:
        """``table`` (a kernel table) in C order, positions innermost, for at
        least positions ``0 .. stop - 1``, kept for the next call."""
        kept = grown_copy(self._position_rows.get(id(table)), table, stop, "C")
        self._position_rows[id(table)] = kept
        return kept

    def _packed_tables(self, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Kernel tables ``cos`` and ``sin`` with equal partner rows in one
        (``packed_tables``), for the loops along the head (Julia's order),
        made at the first such call and kept: one more table's memory."""
        key = (id(cos), id(sin))
        kept = self._packed.get(key)
        if kept is None:
            second = _partner_rows(self.head_size, self._pairing)[1]
            kept = self._packed[key] = packed_tables(cos, sin, second)
        return kept

    def __getstate__(self) -> dict[str, Any]:
        """For pickle and copy: the tables and how channels pair.  What is kept
        for faster calls (remembered compiled calls, which cannot be pickled,
        and copies of the tables) is rebuilt by the copy as it is used.
        ``shared`` is for earlier versions of the package, which read it."""
        return {
            "head_size": self.head_size,
            "cos_cached": self.cos_cached,
            "sin_cached": self.sin_cached,
            "interleaved": self.interleaved,
            "shared": self._shared,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Checked as :meth:`from_tables` checks its arguments; whether
        partner rows are equal is found again from the tables, never taken
        from the state's ``shared``."""
        head_size, cos, sin, dtype, interleaved = _checked_tables(
            *state_fields(state, "RoPE", ("head_size", "cos_cached", "sin_cached", "interleaved"))
        )
        cos, sin = (owned(np.asarray(table, dtype, order="F")) for table in (cos, sin))
        self._set_tables(head_size, cos, sin, interleaved, shared=None)

    def __repr__(self) -> str:
        pairing = ", interleaved=True" if self.interleaved else ""
        return (
            f"RoPE(head_size={self.head_size}, seq_len={self.cos_cached.shape[1]}, "
            f"T=np.{self.cos_cached.dtype}{pairing})"
        )


def _checked_tables(
    head_size: Any, cos_cached: Any, sin_cached: Any, interleaved: Any
) -> tuple[int, np.ndarray, np.ndarray, np.dtype, bool]:
    """The arguments of :meth:`RoPE.from_tables`, checked (its Raises
    section), with the tables as arrays (not converted: the caller makes
    the layer's own in one step) and their float dtype in the machine's
    byte order."""
    interleaved = as_flag(interleaved, "interleaved")
    head_size = _check_head_size(head_size, interleaved)
    given = []
    for name, table in (("cos_cached", cos_cached), ("sin_cached", sin_cached)):
        array = plain_array(table, name)
        dtype = as_float_dtype(array.dtype, f"the dtype of {name}")
        if array.ndim != 2 or array.shape[0] != head_size:
            raise ValueError(
                f"{name} must have shape (head_size={head_size}, seq_len), got {array.shape}"
            )
        given.append((name, array, dtype))
    (_, cos, cos_dtype), (_, sin, sin_dtype) = given
    if cos_dtype != sin_dtype:  # Julia's RoPE{T, A} takes tables of one type: a MethodError
        raise TypeError(
            f"cos_cached and sin_cached must have the same dtype, got {cos_dtype} and {sin_dtype}"
        )
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos_cached and sin_cached must have the same shape, got {cos.shape} and {sin.shape}"
        )
    if head_size % 2:  # interleaved: the last channel has no partner
        for (name, table, _), value in zip(given, (1, 0), strict=True):
            if not (table[-1] == value).all():
                raise ValueError(
                    f"{name}[{head_size - 1}] must be {value:.1f} throughout: an odd "
                    "interleaved head's last channel has no partner and passes "
                    f"through unchanged, got {table[-1][table[-1] != value][0]}"
                )
    return head_size, cos, sin, cos_dtype, interleaved


def _pairing(head_size: int, interleaved: bool) -> int | None:
    """The kernels' pairing marker: ``head_size // 2`` for the half split, None interleaved."""
    return None if interleaved else head_size // 2


def _partner_rows(head_size: int, pairing: int | None) -> tuple[slice, slice]:
    """The rows of every pair's first and second channel."""
    if pairing is not None:
        return slice(0, pairing), slice(pairing, 2 * pairing)
    pairs = head_size - head_size % 2
    return slice(0, pairs, 2), slice(1, pairs, 2)


def _partner_rows_equal(tables: tuple[np.ndarray, ...], pairing: int | None) -> bool:
    """Whether both channels of every pair have the same bits in every table
    (always so for tables built by ``RoPE``; for the backward pass's table
    too, which swaps and negates those rows)."""
    first, second = _partner_rows(tables[0].shape[0], pairing)
    bits = [table.view(f"u{table.itemsize}") for table in tables]
    return all(np.array_equal(table[first], table[second]) for table in bits)


def _backward_sin(sin: np.ndarray, pairing: int | None) -> np.ndarray:
    """The sin table that turns the forward kernel into its transpose.

    The forward pass gives channel h1 ``x1*c1 + (-x2)*s1`` and h2
    ``x2*c2 + x1*s2``; with ``-s2`` in row h1 and ``-s1`` in row h2 it gives
    ``x1*c1 + x2*s2`` and ``x2*c2 + (-x1)*s1``, the transposed rotation, with
    the same roundings.
    """
    swapped = sin.copy(order="F")
    first, second = _partner_rows(sin.shape[0], pairing)
    swapped[first], swapped[second] = sin[second], sin[first]
    np.negative(swapped, out=swapped)
    return read_only(swapped)  # read-only as the forward tables: the same compiled loops


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
        Same shape and memory order as ``x``; same dtype (in the machine's
        byte order), except bool, which becomes int64 (Julia's ``-true ==
        -1``).  Integers negate with wraparound, as in Julia.

    Examples
    --------
    >>> neg_half(np.array([1.0, 2.0, 3.0, 4.0]))
    array([-3., -4.,  1.,  2.])
    >>> neg_half(np.array([1, 2, 3]))
    array([-2, -3,  1])
    """
    x = plain_array(x, "x")
    if x.dtype.kind not in "biufc":
        raise TypeError(f"x must have a numeric dtype, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension, got a 0-d array")
    dim = as_axis(dim, "dim", x.ndim, " (0-based; Julia's dim=k is dim=k-1 here)")
    if x.dtype == np.bool_:
        holdable(x.shape, np.int64, "neg_half's result")  # 8 bytes for each bool's 1
        x = x.astype(np.int64)
    n = x.shape[dim]
    d2 = n // 2

    def along(part: slice) -> tuple[slice, ...]:
        index = [slice(None)] * x.ndim
        index[dim] = part
        return tuple(index)

    out = np.empty_like(x, dtype=native(x.dtype), order="K")
    # Negated into new memory, then copied: numpy 2.1-2.4's ``np.negative``
    # from a strided input into a strided ``out`` reads an input that steps
    # by 4 (32-bit) or 8 (64-bit) elements as if it were contiguous (rows of
    # a Julia-order matrix).
    out[along(slice(0, n - d2))] = -x[along(slice(d2, n))]
    out[along(slice(n - d2, n))] = x[along(slice(0, d2))]
    return out
