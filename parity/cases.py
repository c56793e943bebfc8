"""The case matrix, as data: shared by the live suite, the recorder and ``report --live``.

Each case is a Julia call with its arguments in the fixtures' format (see
:mod:`parity.calls`) and, for calls that take an array, the recipe of a
deterministic input (:class:`InputSpec`; its seed comes from the case id,
so adding cases never changes the inputs of others).

Coverage: every public function; head sizes 0 to 256 (odd ones, which
must fail); sequence lengths 0 to 131072; bases 10_000, 500_000 and 1e6,
integer and float, and small ones; scales 1, 1.0, 0.25, 2 and 8; ``T``
Float16/32/64; inputs Float16/32/64, Int64 and Bool, in C order, Fortran
order and strided views, 3-D to 5-D; masks at their edge lengths; every
failure of the spec (odd sizes, mismatched or too long inputs, 2-D inputs,
empty causal masks), and edges the spec leaves to the source (negative
sizes, empty padding masks, ``neg_half`` past the last axis).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .calls import JULIA_TYPES

__all__ = ["LAYOUTS", "CaseSpec", "InputSpec", "all_cases", "lay_out", "make_input"]

LAYOUTS = ("C", "F", "strided")
"""The memory layouts of inputs (``InputSpec.layout``, ``lay_out``)."""


@dataclass(frozen=True)
class InputSpec:
    """The recipe of an input array.

    Attributes
    ----------
    shape : tuple[int, ...]
        Julia's size, which is also the numpy shape.
    dtype : str
        Julia element type: ``Float16``, ``Float32``, ``Float64``, ``Int64``
        or ``Bool``.
    layout : str
        ``"F"`` (Julia's column-major order), ``"C"``, or ``"strided"``: a
        view taking every other element of a larger array along each axis,
        backwards along the last one.
    """

    shape: tuple[int, ...]
    dtype: str = "Float32"
    layout: str = "F"

    @property
    def label(self) -> str:
        """Short text for case ids, e.g. ``x16x10x3-Float32-F``."""
        return "x" + "x".join(map(str, self.shape)) + f"-{self.dtype}-{self.layout}"


@dataclass(frozen=True)
class CaseSpec:
    """One case of the matrix.

    Attributes
    ----------
    id : str
        Stable and unique, built from the call and its arguments.
    call : str
        One of :data:`parity.calls.CALLS`.
    args : dict[str, Any]
        Julia keyword names and conventions, JSON-serialisable.
    x : InputSpec or None
        The input's recipe, for calls that take an array.
    """

    id: str
    call: str
    args: dict[str, Any]
    x: InputSpec | None = field(default=None)

    @property
    def stricter_than_julia(self) -> bool:
        """Where this port raises on purpose although Julia answers: negative
        sizes (Julia builds empty tables).  The README and the Julia guide
        list these.  (``neg_half`` past the last axis raises in both: Julia's
        ``selectdim`` a ``BoundsError``.)"""
        sizes = ("dim", "seq_len", "head_size", "embedding_size", "max_length", "max_len")
        return any(isinstance(self.args.get(name), int) and self.args[name] < 0 for name in sizes)

    def build_input(self) -> np.ndarray | None:
        """This case's input array (the same on every call), or ``None``."""
        if self.x is None:
            return None
        return make_input(self.x, seed=zlib.crc32(self.id.encode()))


def _float_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    size = int(np.prod(shape))
    magnitude = np.where(rng.random(size) < 0.5, 3.0, 2.0 ** rng.integers(-24, 25, size))
    with np.errstate(over="ignore"):  # large values overflow Float16 to ±Inf, as in Julia
        values = (rng.standard_normal(size) * magnitude).astype(dtype)
    info = np.finfo(dtype)
    specials = np.array(
        [
            -0.0,
            0.0,
            np.nan,
            np.inf,
            -np.inf,
            info.smallest_subnormal,
            -(info.smallest_normal - info.smallest_subnormal),
            info.smallest_normal,
            info.max,
            -info.max,
            info.max / 4,
            1.0,
            -1.0,
            info.eps,
        ],
        dtype=dtype,
    )
    count = min(size, specials.size)
    values[rng.permutation(size)[:count]] = specials[:count]
    return values.reshape(shape)


def _integer_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape))
    small = rng.integers(-5, 6, size)
    values = np.where(rng.random(size) < 0.5, small, rng.integers(-(2**40), 2**40, size))
    limits = np.iinfo(np.int64)
    specials = np.array([0, -1, 1, limits.max, limits.min, 2**53 + 1, -(2**62)], dtype=np.int64)
    count = min(size, specials.size)
    values[rng.permutation(size)[:count]] = specials[:count]
    return values.reshape(shape)


def make_input(spec: InputSpec, seed: int) -> np.ndarray:
    """A deterministic input array.

    Floats mix moderate values with values from 2**-24 to 2**24 times
    larger or smaller, and, at random places, -0.0, 0.0, NaN, ±Inf, the
    smallest and largest subnormals, the smallest normal, ±max, max/4, ±1
    and eps.  Int64 inputs mix small values with values up to 2**40 and
    0, ±1, typemax, typemin, 2**53+1, -2**62.  Bool inputs are random.

    Parameters
    ----------
    spec : InputSpec
        Shape, element type and memory layout.
    seed : int
        Seed of the random generator.

    Returns
    -------
    numpy.ndarray
        Shape ``spec.shape`` and ``spec.layout``'s memory order.

    Raises
    ------
    ValueError
        For an unknown element type or layout.
    """
    if spec.dtype not in JULIA_TYPES or spec.layout not in LAYOUTS:
        raise ValueError(f"unknown input element type or layout: {spec}")
    rng = np.random.default_rng(seed)
    dtype = np.dtype(JULIA_TYPES[spec.dtype])
    if dtype.kind == "b":
        values = rng.random(spec.shape) < 0.5
    elif dtype.kind == "i":
        values = _integer_values(rng, spec.shape)
    else:
        values = _float_values(rng, spec.shape, dtype)
    return lay_out(values, spec.layout)


def lay_out(values: np.ndarray, layout: str) -> np.ndarray:
    """A new array of ``values`` in ``layout`` (one of :data:`LAYOUTS`).

    Parameters
    ----------
    values : numpy.ndarray
        Any array; it is copied, never returned or viewed.
    layout : str
        ``"C"``, ``"F"``, or ``"strided"``: a view taking every other
        element of a larger array along each axis, backwards along the
        last one.

    Returns
    -------
    numpy.ndarray
        The same shape, dtype and elements.

    Raises
    ------
    ValueError
        For an unknown layout.
    """
    if layout == "C":
        return np.array(values, order="C")
    if layout == "F":
        return np.array(values, order="F")
    if layout != "strided":
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    parent = np.ones(tuple(2 * n for n in values.shape), dtype=values.dtype)
    view = parent[(slice(None, None, 2),) * (values.ndim - 1) + (slice(None, None, -2),)]
    view[...] = values
    return view


_ROPES: list[dict[str, Any]] = [
    {"head_size": 2, "seq_len": 1},
    {"head_size": 2, "seq_len": 65536, "T": "Float64"},
    {"head_size": 4, "seq_len": 131072},
    {"head_size": 6, "seq_len": 3, "base": 2, "scale": 0.5, "T": "Float16"},
    {"head_size": 8, "seq_len": 5, "T": "Float64"},
    {"head_size": 16, "seq_len": 10},
    {"head_size": 16, "seq_len": 10, "base": 10_000.0, "scale": 1, "T": "Float32"},
    {"head_size": 32, "seq_len": 300, "base": 1_000_000, "T": "Float16"},
    {"head_size": 64, "seq_len": 512, "scale": 8},
    {"head_size": 64, "seq_len": 1024, "scale": 2, "T": "Float64"},
    {"head_size": 64, "seq_len": 2048, "scale": 0.25},
    {"head_size": 96, "seq_len": 777, "base": 10_000.5},
    {"head_size": 128, "seq_len": 4096},
    {"head_size": 128, "seq_len": 4096, "base": 500_000},
    {"head_size": 128, "seq_len": 8192, "base": 1e6, "scale": 1.0, "T": "Float64"},
    {"head_size": 256, "seq_len": 64},
]
_ABSOLUTES: list[dict[str, Any]] = [
    {"embedding_size": 1, "max_length": 5},
    {"embedding_size": 2, "max_length": 1, "base": 10_000},
    {"embedding_size": 6, "max_length": 10, "base": 7},
    {"embedding_size": 8, "max_length": 131072, "base": 1_000_000},
    {"embedding_size": 64, "max_length": 4096, "base": 500_000.0},
    {"embedding_size": 128, "max_length": 100},
    {"embedding_size": 512, "max_length": 1000, "base": 10_000.0},
]


def _layer_inputs(size: int, length: int, *, sequence_first: bool) -> list[InputSpec]:
    """Inputs of a layer: every element type, every layout, 3-D to 5-D, short and full."""
    seq = min(length, 33)
    shapes_and_types: list[tuple[tuple[int, ...], str, str]]
    shapes_and_types = [((size, seq, 3), dtype, "F") for dtype in JULIA_TYPES]
    shapes_and_types += [
        ((size, seq, 3, 2), "Float32", "C"),
        ((size, seq, 2, 2, 2), "Float16", "F"),
        ((size, seq, 4), "Float64", "C"),
        ((size, seq, 4), "Float32", "strided"),
        ((size, seq, 2), "Int64", "strided"),
        ((size, length, 1), "Float32", "C"),
        ((size, 1, 2), "Float64", "F"),
    ]
    return [
        InputSpec((shape[1], shape[0], *shape[2:]) if sequence_first else shape, dtype, layout)
        for shape, dtype, layout in shapes_and_types
    ]


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return "_".join(map(str, value)) or "empty"
    return str(value)


def _case_id(call: str, args: dict[str, Any], x: InputSpec | None) -> str:
    parts = [call.replace(".", "_")]
    parts += [f"{key}={_value_text(value)}" for key, value in args.items()]
    if x is not None:
        parts.append(x.label)
    return "-".join(parts)


class _Matrix:
    """Collects cases, giving each its id and refusing duplicates."""

    def __init__(self) -> None:
        self.cases: dict[str, CaseSpec] = {}

    def add(self, call: str, args: dict[str, Any], x: InputSpec | None = None) -> None:
        case = CaseSpec(_case_id(call, args, x), call, args, x)
        if case.id in self.cases:
            raise ValueError(f"duplicate parity case {case.id}")
        self.cases[case.id] = case


def _add_frequencies(matrix: _Matrix) -> None:
    for dim, seq_len, base in [
        (16, 10, 10_000),
        (15, 7, 10_000),
        (1, 3, 10_000),
        (2, 1, 10),
        (3, 5, 2),
        (64, 100, 500_000.0),
        (96, 333, 10_000.5),
        (128, 2048, 1_000_000),
        (128, 4096, 10_000),
        (16, 10, 1e6),
        (256, 64, 10_000),
        (512, 1000, 10_000),
        (4, 3, 1),
        (4, 3, 0.5),
        (4, 3, 0),
        (0, 4, 10_000),
        (8, 0, 10_000),
        (-4, 3, 10_000),
        (4, -2, 10_000),
    ]:
        matrix.add("compute_frequencies", {"dim": dim, "seq_len": seq_len, "base": base})


def _add_layers(matrix: _Matrix) -> None:
    for args in _ROPES:
        matrix.add("RoPE", args)
        for spec in _layer_inputs(args["head_size"], args["seq_len"], sequence_first=False):
            matrix.add("RoPE.apply", args, spec)
    for args in _ABSOLUTES:
        matrix.add("AbsolutePE", args)
        for spec in _layer_inputs(args["embedding_size"], args["max_length"], sequence_first=True):
            matrix.add("AbsolutePE.apply", args, spec)
    empty_rope = {"head_size": 16, "seq_len": 0}
    empty_absolute = {"embedding_size": 16, "max_length": 0}
    matrix.add("RoPE", empty_rope)
    matrix.add("RoPE.apply", empty_rope, InputSpec((16, 0, 2)))
    matrix.add("RoPE", {"head_size": 0, "seq_len": 4})
    matrix.add("RoPE.apply", {"head_size": 0, "seq_len": 4}, InputSpec((0, 4, 2)))
    matrix.add("AbsolutePE", empty_absolute)
    matrix.add("AbsolutePE.apply", empty_absolute, InputSpec((0, 16, 2)))
    matrix.add("AbsolutePE", {"embedding_size": 0, "max_length": 5})


def _add_neg_half(matrix: _Matrix) -> None:
    for dim, shape in [
        (1, (7, 4, 3)),
        (2, (7, 5, 3)),
        (3, (2, 3, 4)),
        (4, (6, 5, 4, 3)),
        (1, (5,)),
        (1, (1, 4)),
        (1, (0, 3)),
        (1, (16, 10, 1)),
    ]:
        for dtype in JULIA_TYPES:
            matrix.add("neg_half", {"dim": dim}, InputSpec(shape, dtype, "F"))
    matrix.add("neg_half", {"dim": 1}, InputSpec((8, 3, 2), "Float32", "strided"))
    matrix.add("neg_half", {"dim": 2}, InputSpec((3, 9, 2), "Float64", "C"))
    matrix.add("neg_half", {"dim": 3}, InputSpec((2, 3), "Float32", "F"))


def _add_masks(matrix: _Matrix) -> None:
    for seq_len in (1, 2, 3, 17, 64, 0, -1, -5):
        matrix.add("create_causal_mask", {"seq_len": seq_len})
    for lengths, max_len in [
        ([2, 3, 1], 4),
        ([0, 5], 5),
        ([7], 3),
        ([-1, 2], 3),
        ([3, 3], 3),
        ([1, 2], 1),
        ([-1, 7, 2], 4),
        ([], 3),
        ([2, 1], 0),
        ([2], -1),
    ]:
        matrix.add("create_padding_mask", {"lengths": lengths, "max_len": max_len})


def _add_failures(matrix: _Matrix) -> None:
    for head_size in (1, 3, 7, 15):
        matrix.add("RoPE", {"head_size": head_size, "seq_len": 10})
    matrix.add("RoPE", {"head_size": -2, "seq_len": 4})
    matrix.add("RoPE", {"head_size": 16, "seq_len": -3})
    for embedding_size in (3, 7, 9):
        matrix.add("AbsolutePE", {"embedding_size": embedding_size, "max_length": 10})
    matrix.add("AbsolutePE", {"embedding_size": 4, "max_length": -1})
    matrix.add("AbsolutePE", {"embedding_size": -2, "max_length": 5})
    rope = {"head_size": 16, "seq_len": 10}
    for shape in [(8, 10, 1), (16, 11, 1), (16, 10), (16,)]:
        matrix.add("RoPE.apply", rope, InputSpec(shape))
    absolute = {"embedding_size": 16, "max_length": 8, "base": 10_000}
    for shape in [(8, 8, 1), (9, 16, 1), (9, 8, 1), (8, 16), (8,)]:
        matrix.add("AbsolutePE.apply", absolute, InputSpec(shape))


def all_cases() -> list[CaseSpec]:
    """Every case of the matrix, in a stable order.

    Returns
    -------
    list[CaseSpec]
        Frequencies, layers (tables and applications), ``neg_half``, masks,
        then the failures; ids unique.
    """
    matrix = _Matrix()
    _add_frequencies(matrix)
    _add_layers(matrix)
    _add_neg_half(matrix)
    _add_masks(matrix)
    _add_failures(matrix)
    return list(matrix.cases.values())
