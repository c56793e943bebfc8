"""Argument validation and Julia's type promotion, in one place.

Every public function calls these before any work is done, so that bad input
raises a ``TypeError`` or ``ValueError`` naming what was expected and what came,
and nothing is allocated or computed for it.
"""

from __future__ import annotations

import functools
import numbers
import operator
from typing import Any

import numpy as np

from ._views import same_elements

__all__ = [
    "INT_MAX",
    "MAX_QUERY_OFFSET",
    "as_array",
    "as_axis",
    "as_flag",
    "as_float_dtype",
    "as_real",
    "as_size",
    "check_finite_angles",
    "held_table",
    "holdable",
    "in_machine_order",
    "integer_array",
    "native",
    "output_for",
    "plain_array",
    "promote",
    "resolve_positions",
    "state_fields",
]

_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

INT_MAX = 2**63 - 1
"""Julia's ``typemax(Int)`` on 64-bit machines: the largest size, length or
offset an argument can be (Julia's ``Int`` arguments cannot hold more)."""

MAX_QUERY_OFFSET = 2**62
"""The largest position of a first query (ALiBi's and the relative
positions' ``offset``): with as many queries and keys as memory can index,
positions and distances stay within int64."""


def holdable(shape: tuple[int, ...], dtype: Any, what: str) -> None:
    """Raise ``MemoryError`` at once where an array of ``shape`` and ``dtype``
    (``what``, in the error) would take more bytes than any machine can
    address: numpy refuses to make it with a ``ValueError`` ("array is too
    big") that names no argument.  Axes of length 0 count as 1, as they do
    for numpy (an array's strides must fit too)."""
    size = np.dtype(dtype).itemsize
    for length in shape:
        size *= max(length, 1)
    if size > INT_MAX:
        raise MemoryError(
            f"{what} of shape {shape} and dtype {np.dtype(dtype)} would take {size} bytes "
            f"(with its strides), more than the 2**63 - 1 any machine can address"
        )


def as_size(
    value: Any, name: str, minimum: int = 0, julia: str = "", maximum: int = INT_MAX
) -> int:
    """Return ``value`` as a Python int (Julia ``Int``), rejecting floats and bools.

    Julia's constructors take ``::Int`` arguments: ``RoPE(64.0, 10)`` and
    ``RoPE(true, 10)`` are method errors there, so they are ``TypeError`` here,
    as is any value of a bool dtype (a 0-d ``torch.tensor(True)`` has
    ``__index__``).  Numpy integers are accepted.  Below ``minimum``, a ``ValueError`` that
    ends with ``julia`` in parentheses, if given (what Julia does instead);
    above ``maximum`` (by default ``typemax(Int)``, beyond which Julia's
    ``Int`` cannot convert it), a ``ValueError``.
    """
    if isinstance(value, (bool, np.bool_)) or _of_bool_dtype(value):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        size = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}"
        ) from None
    if size < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {size}" + (julia and f" ({julia})"))
    if size > maximum:
        limit = "2**63 - 1, the largest int64" if maximum == INT_MAX else maximum
        raise ValueError(f"{name} must be at most {limit}, got {size}")
    return size


def _of_bool_dtype(value: Any) -> bool:
    """Whether ``value`` has a bool ``dtype``: numpy's ``bool``, torch's
    ``torch.bool``, or any array library's so named."""
    return str(getattr(value, "dtype", "")).rpartition(".")[2] == "bool"


def as_axis(value: Any, name: str, ndim: int, note: str = "") -> int:
    """``value`` as an axis of an ``ndim``-d array, negative axes allowed
    (numpy's convention); either side out of range says the range, with
    ``note`` after it, if given."""
    axis = as_size(value, name, minimum=-INT_MAX - 1)
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{name} must be in [{-ndim}, {ndim - 1}] for a {ndim}-d array{note}, got {axis}"
        )
    return axis


def as_flag(value: Any, name: str) -> bool:
    """A keyword switch: exactly True or False (numpy bools too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def as_real(value: Any, name: str, julia: bool = True) -> float:
    """Return a real number (Julia ``::Number``) promoted to float64, as Julia does.

    Julia promotes an integer or Float32 ``base``/``scale`` to Float64 before
    using it; ``float()`` does the same exact conversion (correctly rounded for
    integers beyond 2**53).  A fraction (``fractions.Fraction``) is Julia's
    ``Rational``: within Julia's ``Int`` (``Rational{Int}``) its numerator and
    denominator are each rounded to Float64, then divided, as Julia converts
    one (two roundings where either is beyond 2**53, which ``float()`` would
    round once).  Beyond, Julia's ``Rational{BigInt}`` would promote the
    whole computation to ``BigFloat``, which float64 tables cannot follow:
    such a fraction is rounded once, as ``float()`` does.  ``julia`` False
    (a parameter Julia does not have) rounds every fraction once.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if julia and isinstance(value, numbers.Rational) and not isinstance(value, numbers.Integral):
        numerator, denominator = int(value.numerator), int(value.denominator)
        if -INT_MAX - 1 <= numerator <= INT_MAX and denominator <= INT_MAX:
            return float(numerator) / float(denominator)
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large for a float64: {value!r}") from None


def as_float_dtype(T: Any, name: str = "T", float16: bool = True, julia: bool = True) -> np.dtype:
    """Translate Julia's ``T=Float16/Float32/Float64`` into a numpy float
    dtype, in the machine's byte order.  ``name`` is what the error calls
    ``T``; ``float16`` False refuses float16 too (tables that are trained, or
    computed in float32 and up); ``julia`` False leaves Julia's type names
    out of the error (a layer Julia does not have)."""
    allowed = _FLOAT_DTYPES if float16 else _FLOAT_DTYPES[1:]
    try:
        dtype = native(np.dtype(T))
    except TypeError:
        dtype = np.dtype(object)
    if T is None or not any(dtype == one for one in allowed):
        numpy_names = [f"np.{one.name}" for one in allowed]
        julia_names = "/".join(f"Float{one.itemsize * 8}" for one in allowed)
        also = f" (Julia's {julia_names})" if julia else ""
        raise TypeError(
            f"{name} must be {', '.join(numpy_names[:-1])} or {numpy_names[-1]}{also}, got {T!r}"
        )
    return dtype


def as_array(x: Any, name: str, min_ndim: int) -> np.ndarray:
    """View ``x`` as a numpy array of a real numeric dtype with ``min_ndim`` dims or more.

    Nothing is copied for a numpy array; other array-likes go through
    ``np.asarray``.  An array in the other byte order (read from a big-endian
    file) stays so: the loops read it as ``in_machine_order`` copies it,
    once the caller's checks have passed.  Bool, integer and float16/32/64
    dtypes are accepted, as Julia accepts ``Bool``, ``Int`` and ``Float``
    arrays; complex, object, string and extended-precision arrays are
    rejected.
    """
    array = plain_array(x, name)
    dtype = native(array.dtype)
    if not (dtype.kind in "biu" or dtype in _FLOAT_DTYPES):
        raise TypeError(f"{name} must have a bool, integer or float16/32/64 dtype, got {dtype}")
    if array.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, "
            f"got shape {array.shape} ({array.ndim} dims)"
        )
    return array


def in_machine_order(array: np.ndarray) -> np.ndarray:
    """``array`` itself in the machine's byte order, else a copy in it with
    the same values (in the same memory order): what the loops read."""
    return array if array.dtype.isnative else array.astype(native(array.dtype), order="K")


def plain_array(value: Any, name: str, int64: bool = False, of: str = "numbers") -> np.ndarray:
    """``np.asarray(value)``, refusing masked arrays: their mask would be
    dropped and the masked elements' hidden values used; and Python ints
    that no 64-bit integer holds (``refuse_wide_ints``, with ``int64``),
    which numpy would round to float64 or keep as objects; and what is no
    array of numbers (None, a string, a list of them), whose dtype as numpy
    reads it ("got object") would not say what came: a ``TypeError``
    naming its type, and saying that ``name`` must be an array ``of`` what.
    What numpy cannot make an array of (ragged lists) raises its
    ``ValueError``, naming ``name``."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must not be a masked array (its mask would be ignored); "
            f"pass {name}.filled(value) or {name}.data"
        )
    try:
        array = np.asarray(value)
    except ValueError as error:
        raise ValueError(f"{name} could not be read as an array: {error}") from None
    refuse_wide_ints(value, array, name, int64)
    if array.dtype.kind in _NOT_NUMBERS and not isinstance(value, np.ndarray):
        read = f" (read as dtype {array.dtype})" if array.ndim else ""
        raise TypeError(f"{name} must be an array of {of}, got {type(value).__name__}{read}")
    return array


_NOT_NUMBERS = "OSUV"
"""The dtype kinds of what numpy makes of objects, strings and bytes."""


_PYTHON_NUMBERS = (list, tuple, int)
"""What can hold Python ints beyond 64 bits for numpy to convert: nested
sequences of them, or one."""


def refuse_wide_ints(value: Any, array: np.ndarray, name: str, int64: bool = False) -> None:
    """Python ints that no 64-bit integer holds, which numpy makes float64
    or objects (``value`` a Python int, or nested lists or tuples): a
    ``ValueError`` naming the one furthest from 0.  ``int64``: also those
    that only uint64 holds (beyond Julia's ``Int``), which numpy makes
    uint64 when alone and float64 beside others."""
    values = _listed_integers(value, array, "fOu" if int64 else "fO")
    if values is not None:
        wide = [v for v in values if not -INT_MAX - 1 <= v <= INT_MAX]
        if len(wide):
            furthest = max(wide, key=abs)
            raise ValueError(
                f"{name} must fit in {'int64' if int64 else '64-bit integers'}, got {furthest}"
            )


def _listed_integers(value: Any, array: np.ndarray, kinds: str) -> np.ndarray | None:
    """The elements of ``value``, a Python int or nested lists or tuples
    (not array-likes, read in their own dtype), that numpy read as
    ``array`` of a dtype of one of ``kinds``: a flat object array, where
    every one is an integer (Python's or numpy's, not a bool); else None."""
    if not (isinstance(value, _PYTHON_NUMBERS) and array.dtype.kind in kinds and array.size):
        return None
    values = np.asarray(value, dtype=object).ravel()
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return values
    return None


def integer_array(value: Any, name: str, julia: str = "") -> np.ndarray:
    """``plain_array(value, name)`` of integers, or of nothing (``[]``,
    which numpy makes float64: the callers say what that means).  Python
    ints beyond int64 (Julia's ``Int``), which numpy makes uint64, float64
    or objects, are refused as out of range; other elements name their
    dtype (``julia``, if given, Julia's type, follows "must be integers").
    An ndarray is taken in its own integer dtype, uint64 included; a list
    of integers of numpy's types that no one integer dtype holds (``int8``
    beside ``uint64``), which numpy makes float64, as int64."""
    array = plain_array(value, name, int64=True, of=f"integers{julia}")
    if array.dtype.kind in "iu" or not array.size:
        return array
    if _listed_integers(value, array, "f") is not None:  # within int64: ``plain_array``
        return np.array(value, dtype=np.int64)
    raise TypeError(f"{name} must be integers{julia}, got dtype {array.dtype}")


def held_table(value: Any, name: str, shape: str, float16: bool) -> np.ndarray:
    """A trainable table a layer holds itself, not a copy (``LearnedPE``,
    ``RelativePE``): a 2-D float array in the machine's byte order, float16
    only if ``float16``.  ``shape`` names its axes in the error."""
    table = plain_array(value, name)
    as_float_dtype(table.dtype, f"the dtype of {name}", float16=float16, julia=False)
    if not table.dtype.isnative:
        raise TypeError(
            f"{name} must be in the machine's byte order (the table is used as it is, "
            f"not copied), got {table.dtype.str}; pass {name}.astype("
            f"'{native(table.dtype).str}')"
        )
    if table.ndim != 2:
        raise ValueError(f"{name} must be {shape}, got shape {table.shape}")
    return table


def native(dtype: np.dtype) -> np.dtype:
    """``dtype`` in the machine's byte order (itself if it already is)."""
    return dtype if dtype.isnative else dtype.newbyteorder("=")


@functools.cache
def promote(x_dtype: np.dtype, table_dtype: np.dtype) -> np.dtype:
    """Julia's ``promote_type(eltype(x), T)`` for the dtypes the package accepts.

    Bool and integer inputs take the table's float type (unlike numpy, where
    ``int64 * float32`` is float64); float inputs take the wider float type.
    """
    if x_dtype.kind in "biu":
        return table_dtype
    return np.promote_types(x_dtype, table_dtype)


def output_for(x: np.ndarray, dtype: np.dtype, out: Any, name: str = "x") -> np.ndarray:
    """The array a forward pass writes: ``out`` once checked, else a new one.

    A new output is shaped like ``x`` in ``x``'s memory order (C- and
    F-contiguous inputs give outputs of the same order; other layouts the
    contiguous layout closest to ``x``'s strides, numpy's ``order='K'``).  A
    given ``out`` must match ``x``'s shape and the promoted dtype exactly, be
    writeable, and either not overlap ``x`` at all or be ``x`` itself (same
    buffer, same strides): a partial overlap would be read after written.
    Its own elements must not overlap each other (a broadcast view): they
    cannot hold the result, and in place each would be rotated or added to
    as many times as it is seen.  Masked arrays are refused, as for ``x``.
    Errors call ``x`` ``name`` (``dy`` in a backward pass).
    """
    if out is None:
        holdable(x.shape, dtype, "the output")  # a broadcast x may be of any size
        return np.empty_like(x, dtype=dtype, order="K")
    if not isinstance(out, np.ndarray) or isinstance(out, np.ma.MaskedArray):
        kind = "a masked array (its mask would be ignored)" if isinstance(out, np.ndarray) else ""
        raise TypeError(f"out must be a numpy array, got {kind or type(out).__name__}")
    if out.shape != x.shape:
        raise ValueError(f"out must have shape {x.shape} like {name}, got {out.shape}")
    if out.dtype != dtype and out.dtype == dtype.newbyteorder():
        raise TypeError(
            f"out must have dtype {dtype} in the machine's byte order, which the loops "
            f"write, got {dtype} in the other byte order ({out.dtype.str!r})"
        )
    if out.dtype != dtype:
        raise TypeError(
            f"out must have dtype {dtype} (Julia's promotion of {name}'s {x.dtype} "
            f"with the table type), got {out.dtype}"
        )
    if not out.flags.writeable:
        raise ValueError("out must be writeable, got a read-only array")
    if _overlaps_itself(out):
        raise ValueError(
            "out's elements may overlap each other (a broadcast or as_strided view of "
            f"strides {out.strides}): it cannot hold the result; pass a separate array"
        )
    if (
        out is not x
        and np.may_share_memory(x, out)
        and not same_elements(x, out)
        and _share_elements(x, out)
    ):
        raise ValueError(
            f"out overlaps {name} without being {name} itself; pass out={name} for in place, "
            "or a separate array"
        )
    return out


_TooHardError: type[Exception] = getattr(np, "exceptions", np).TooHardError
"""numpy's ``TooHardError`` (in ``numpy.exceptions`` from numpy 1.25)."""

_OVERLAP_WORK = 1 << 16
"""Effort ``np.shares_memory`` may spend on telling two arrays' elements
apart (``max_work``) before ``_share_elements`` counts them as shared."""


def _share_elements(x: np.ndarray, out: np.ndarray) -> bool:
    """Whether an element of ``out`` shares memory with one of ``x``: numpy's
    exact test, which tells apart arrays interleaved in one block of memory
    (other batch columns, the next slot of a cache), where
    ``np.may_share_memory`` compares the blocks' bounds only.  Where it
    cannot tell within ``_OVERLAP_WORK``, they count as sharing."""
    try:
        # numpy takes any effort; its stubs admit only -1 (exact) and 0 (bounds).
        return bool(np.shares_memory(x, out, max_work=_OVERLAP_WORK))  # type: ignore[arg-type]
    except _TooHardError:
        return True


def _overlaps_itself(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` may share memory.

    False where its axes, taken from the smallest stride up, each step past
    the whole block of the axes before it, as in every slice, transpose or
    reshape of an array that does not overlap itself; a zero stride on an
    axis longer than 1 never does.  Other layouts (made with
    ``as_strided``) count as overlapping, even the few that do not.
    """
    if a.size == 0:
        return False
    extent = a.itemsize
    for stride, length in sorted(
        (abs(s), n) for s, n in zip(a.strides, a.shape, strict=True) if n > 1
    ):
        if stride < extent:
            return True
        extent += stride * (length - 1)
    return False


def resolve_positions(
    seq_len: int,
    column_shape: tuple[int, ...],
    table_length: int,
    offset: Any = 0,
    positions: Any = None,
    name: str = "x",
) -> int | np.ndarray:
    """Where each sequence position reads the cached tables, for the input
    called ``name`` in errors (``dy`` in a backward pass).

    Returns the ``offset`` (an int: positions ``offset .. offset+seq_len-1``),
    or the position ids as an intp array of shape ``(seq_len,)`` or
    ``column_shape`` (``x.shape[1:]``: one id per position and batch column).
    Every position must lie inside the tables.
    """
    if positions is None:
        if type(offset) is not int or not 0 <= offset <= INT_MAX:
            offset = as_size(offset, "offset")
        if seq_len + offset > table_length:
            start = f" from offset {offset}" if offset else ""
            raise ValueError(
                f"Sequence length exceeds maximum length: {name} has seq_len {seq_len}"
                f"{start}, the tables hold {table_length}"
            )
        return offset
    if not (type(offset) is int and offset == 0) and as_size(offset, "offset") != 0:
        raise ValueError("pass either offset or positions, not both")
    ids = integer_array(positions, "positions")  # or ``[]``, float64 to numpy: none
    if ids.shape not in ((seq_len,), tuple(column_shape)):
        raise ValueError(
            f"positions must have shape ({seq_len},) or {tuple(column_shape)}, got {ids.shape}"
        )
    if ids.size and (ids.min() < 0 or ids.max() >= table_length):
        raise ValueError(
            f"positions must lie in [0, {table_length}) (the tables' length), "
            f"got values from {ids.min()} to {ids.max()}"
        )
    return ids.astype(np.intp, copy=False)


def check_finite_angles(angles: np.ndarray, function: str, product: str) -> None:
    """Raise where Julia's ``sin``/``cos`` would throw ``DomainError`` (an
    infinite angle); ``product`` says what the angles are."""
    if np.isinf(angles).any():
        raise ValueError(
            f"{function}(x) is only defined for finite x: the angles ({product}) "
            "overflow to Inf; Julia raises DomainError here"
        )


def state_fields(state: Any, layer: str, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The fields ``names`` of a ``layer``'s pickled state, in that order:
    a dict that holds them (what else it holds is ignored, as what another
    version of the package kept).  The caller checks their values as the
    arguments they stand for.  ``TypeError`` for a state of another type,
    ``ValueError`` naming the fields it lacks."""
    if not isinstance(state, dict):
        raise TypeError(
            f"the pickled state of a {layer} must be a dict, got {type(state).__name__}"
        )
    missing = [name for name in names if name not in state]
    if missing:
        raise ValueError(
            f"the pickled state of a {layer} must hold {', '.join(names)}; "
            f"it lacks {', '.join(missing)}"
        )
    return tuple(state[name] for name in names)
