"""The case matrix of the live suite and the recorder, as data.

Each case is a Julia call with its keyword arguments (the fixtures' format)
and, for calls that take an array, a recipe for a deterministic input.
``python -m parity record`` runs these through Julia; the live tests run
them through both Julia and this package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CaseSpec", "InputSpec", "all_cases", "make_input"]

_NUMPY = {
    "Float16": np.float16,
    "Float32": np.float32,
    "Float64": np.float64,
    "Int64": np.int64,
    "Bool": np.bool_,
}


@dataclass(frozen=True)
class InputSpec:
    """A deterministic input array: shape, Julia element type, memory layout, seed."""

    shape: tuple[int, ...]
    dtype: str = "Float32"
    layout: str = "F"  # "C", "F" (Julia's), or "strided" (a reversed, every-other view)
    seed: int = 0


@dataclass(frozen=True)
class CaseSpec:
    id: str
    call: str
    args: dict[str, Any]
    x: InputSpec | None = field(default=None)


def make_input(spec: InputSpec) -> np.ndarray:
    """The input array of a case, with zeros of both signs, NaN, ±Inf, subnormal
    and large values mixed into the float ones."""
    rng = np.random.default_rng(spec.seed)
    dtype = np.dtype(_NUMPY[spec.dtype])
    if dtype == np.bool_:
        values = rng.random(spec.shape) < 0.5
    elif dtype.kind == "i":
        values = rng.integers(-5, 6, size=spec.shape).astype(dtype)
    else:
        values = (rng.standard_normal(spec.shape) * 3).astype(dtype)
        info = np.finfo(dtype)
        specials = np.array(
            [0.0, -0.0, np.nan, np.inf, -np.inf, info.smallest_subnormal, info.max / 4, -1.0],
            dtype=dtype,
        )
        flat = values.reshape(-1)
        count = min(flat.size, specials.size)
        flat[:count] = specials[:count]
    if spec.layout == "C":
        return np.ascontiguousarray(values)
    if spec.layout == "F":
        return np.asfortranarray(values)
    wide = np.zeros((*spec.shape[:-1], 2 * spec.shape[-1]), dtype=dtype)
    view = wide[..., ::-2]
    view[...] = values
    return view


_ROPES: list[dict[str, Any]] = [
    {"head_size": 2, "seq_len": 1},
    {"head_size": 16, "seq_len": 10},
    {"head_size": 8, "seq_len": 5, "T": "Float64"},
    {"head_size": 64, "seq_len": 1024},
    {"head_size": 128, "seq_len": 4096},
    {"head_size": 128, "seq_len": 4096, "base": 500_000},
    {"head_size": 32, "seq_len": 300, "base": 1_000_000, "T": "Float16"},
    {"head_size": 96, "seq_len": 777, "base": 10_000.5},
    {"head_size": 64, "seq_len": 2048, "scale": 0.25},
    {"head_size": 64, "seq_len": 512, "scale": 8},
    {"head_size": 256, "seq_len": 64},
    {"head_size": 4, "seq_len": 131072},
    {"head_size": 2, "seq_len": 65536, "T": "Float64"},
    {"head_size": 64, "seq_len": 1024, "T": "Float64", "scale": 2},
]
_ABSOLUTES: list[dict[str, Any]] = [
    {"embedding_size": 1, "max_length": 5, "base": 10_000},
    {"embedding_size": 2, "max_length": 1, "base": 10_000},
    {"embedding_size": 6, "max_length": 10, "base": 7},
    {"embedding_size": 128, "max_length": 100, "base": 10_000},
    {"embedding_size": 512, "max_length": 1000, "base": 10_000},
    {"embedding_size": 64, "max_length": 4096, "base": 500_000.0},
    {"embedding_size": 8, "max_length": 131072, "base": 10_000},
]


def _inputs(first: int, second: int, third_axis: int) -> list[InputSpec]:
    """Inputs in every dtype, layout, 3-D and 4-D, and with a short sequence."""
    seq = min(second, 33)
    specs = [InputSpec((first, seq, 3), dtype, "F") for dtype in _NUMPY]
    specs += [
        InputSpec((first, seq, 3, 2), "Float32", "F"),
        InputSpec((first, seq, 4), "Float64", "C"),
        InputSpec((first, seq, 4), "Float32", "strided"),
        InputSpec((first, second, 1), "Float32", "C"),
    ]
    return [
        InputSpec(
            spec.shape if third_axis == 0 else (spec.shape[1], spec.shape[0], *spec.shape[2:]),
            spec.dtype,
            spec.layout,
            seed,
        )
        for seed, spec in enumerate(specs)
    ]


def all_cases() -> list[CaseSpec]:
    """Every case, with stable ids."""
    cases: list[CaseSpec] = []

    def add(call: str, args: dict[str, Any], x: InputSpec | None = None) -> None:
        cases.append(CaseSpec(f"{call.replace('.', '_')}-{len(cases):04d}", call, args, x))

    for dim, seq_len, base in [
        (16, 10, 10_000),
        (15, 7, 10_000),
        (1, 3, 10_000),
        (2, 1, 10),
        (128, 4096, 10_000),
        (128, 2048, 1_000_000),
        (96, 333, 10_000.5),
        (256, 64, 10_000),
        (3, 5, 2),
        (0, 4, 10_000),
        (8, 0, 10_000),
    ]:
        add("compute_frequencies", {"dim": dim, "seq_len": seq_len, "base": base})
    for args in _ROPES:
        add("RoPE", args)
    for args in _ROPES:
        for spec in _inputs(args["head_size"], args["seq_len"], 0):
            add("RoPE.apply", args, spec)
    for args in _ABSOLUTES:
        add("AbsolutePE", args)
        if args["embedding_size"] % 2 == 0:
            for spec in _inputs(args["embedding_size"], args["max_length"], 1):
                add("AbsolutePE.apply", args, spec)
    for dim, shape in [(1, (7, 4, 3)), (2, (7, 5, 3)), (3, (2, 3, 4)), (1, (5,)), (1, (16, 10, 1))]:
        for dtype in ("Float32", "Int64", "Bool"):
            add("neg_half", {"dim": dim}, InputSpec(shape, dtype, "F"))
    for seq_len in (1, 2, 3, 17):
        add("create_causal_mask", {"seq_len": seq_len})
    for lengths, max_len in [([2, 3, 1], 4), ([0, 5], 5), ([3, 3], 3), ([-1, 7, 2], 4), ([1], 1)]:
        add("create_padding_mask", {"lengths": lengths, "max_len": max_len})
    # Failures: each must raise on both sides.
    add("create_causal_mask", {"seq_len": 0})
    add("create_causal_mask", {"seq_len": -1})
    for head_size in (15, 7, 1):
        add("RoPE", {"head_size": head_size, "seq_len": 10})
    for size in (7, 9):
        add("AbsolutePE", {"embedding_size": size, "max_length": 10})
    rope, absolute = {"head_size": 16, "seq_len": 10}, {"embedding_size": 16, "max_length": 8}
    add("RoPE.apply", rope, InputSpec((8, 10, 1)))
    add("RoPE.apply", rope, InputSpec((16, 11, 1)))
    add("RoPE.apply", rope, InputSpec((16, 10)))
    add("AbsolutePE.apply", absolute, InputSpec((8, 8, 1)))
    add("AbsolutePE.apply", absolute, InputSpec((9, 16, 1)))
    add("AbsolutePE.apply", absolute, InputSpec((8, 16)))
    return cases
