"""How a parity case runs on the Python side.

A case is Julia's call and keyword arguments, as the fixtures record them:
``call`` is one of ``compute_frequencies``, ``RoPE``, ``RoPE.apply``,
``AbsolutePE``, ``AbsolutePE.apply``, ``neg_half`` (with Julia's 1-based
``dim``), ``create_causal_mask``, ``create_padding_mask``; ``T`` is a Julia
type name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import positional_embeddings as pe

__all__ = ["JULIA_FLOAT_TYPES", "python_call"]

JULIA_FLOAT_TYPES = {"Float16": np.float16, "Float32": np.float32, "Float64": np.float64}


def _keywords(args: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    keywords = {name: args[name] for name in names if name in args}
    if "T" in keywords:
        keywords["T"] = JULIA_FLOAT_TYPES[keywords["T"]]
    return keywords


def python_call(call: str, args: dict[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
    """Run one case with this package; return its outputs by the fixtures' names."""
    if call == "compute_frequencies":
        return {"out": pe.compute_frequencies(args["dim"], args["seq_len"], args["base"])}
    if call in ("RoPE", "RoPE.apply"):
        rope = pe.RoPE(
            args["head_size"], args["seq_len"], **_keywords(args, ("base", "scale", "T"))
        )
        if call == "RoPE":
            return {"cos_cached": rope.cos_cached, "sin_cached": rope.sin_cached}
        return {"y": rope(x)}
    if call in ("AbsolutePE", "AbsolutePE.apply"):
        layer = pe.AbsolutePE(
            args["embedding_size"], args["max_length"], **_keywords(args, ("base",))
        )
        if call == "AbsolutePE":
            return {"embeddings": layer.embeddings}
        return {"y": layer(x)}
    if call == "neg_half":
        return {"y": pe.neg_half(x, args["dim"] - 1)}
    if call == "create_causal_mask":
        return {"mask": pe.create_causal_mask(args["seq_len"])}
    if call == "create_padding_mask":
        return {"mask": pe.create_padding_mask(args["lengths"], args["max_len"])}
    raise ValueError(f"unknown parity call {call!r}")
