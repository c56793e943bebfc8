"""How a parity case runs: one function for both languages.

A case is Julia's call and keyword arguments, as the fixtures record them:
``call`` is one of :data:`CALLS`; ``T`` is a Julia type name; ``neg_half``'s
``dim`` is Julia's 1-based one; ``base`` and ``scale`` keep their JSON type
(a JSON integer was a Julia ``Int``, a JSON float a ``Float64``).

:func:`run_case` turns that into calls of this package's Python API, made
on any object that has it: the package itself (:func:`python_call`), or the
bridge's mirror of the Julia package, which takes the same Python arguments
(:func:`parity.bridge.julia_call`).  So both sides always get the same
arguments, converted in one place.

This module must not import the package at import time: the bridge imports
it before Julia starts, and Julia must start before Numba loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "CALLS",
    "JULIA_TYPES",
    "CaseError",
    "Runner",
    "python_axis",
    "python_call",
    "python_errors",
    "run_case",
]

CALLS = (
    "compute_frequencies",
    "RoPE",
    "RoPE.apply",
    "AbsolutePE",
    "AbsolutePE.apply",
    "neg_half",
    "create_causal_mask",
    "create_padding_mask",
)

Runner = Callable[[str, Mapping[str, Any], np.ndarray | None], dict[str, np.ndarray]]
"""``run(call, args, x)``: one case's outputs by name (:func:`python_call`, ``julia_call``)."""

JULIA_TYPES: dict[str, type[np.generic]] = {
    "Float16": np.float16,
    "Float32": np.float32,
    "Float64": np.float64,
    "Int64": np.int64,
    "Bool": np.bool_,
}


_JULIA_ERRORS: dict[str, type[Exception]] = {
    "ArgumentError": ValueError,
    "AssertionError": ValueError,
    "BoundsError": ValueError,
    "DimensionMismatch": ValueError,
    "DomainError": ValueError,
    "MethodError": TypeError,
}
"""What this port raises where Julia raises each of these exceptions."""


class CaseError(Exception):
    """A case that cannot be run as recorded (no input where the call takes
    one, an unknown call): a fault of the case or the harness, which never
    stands for the error Julia raised (not a ``ValueError``)."""


def python_errors(julia_type: str) -> tuple[type[Exception], ...]:
    """The exceptions this port may raise where Julia raised ``julia_type``.

    Parameters
    ----------
    julia_type : str
        The name of Julia's exception type, as the fixtures record it
        (``AssertionError``, ``DimensionMismatch``, ...).

    Returns
    -------
    tuple[type[Exception], ...]
        ``ValueError`` for Julia's errors of bad values and sizes (argument,
        assertion, bounds, dimension and domain errors), ``TypeError`` for a
        ``MethodError``; either for any other type.
    """
    if julia_type in _JULIA_ERRORS:
        return (_JULIA_ERRORS[julia_type],)
    return (ValueError, TypeError)


def python_axis(julia_dim: int) -> int:
    """The 0-based numpy axis of Julia's 1-based ``dim``.

    Parameters
    ----------
    julia_dim : int
        Julia's dimension, 1 or more.

    Returns
    -------
    int
        ``julia_dim - 1``.

    Raises
    ------
    ValueError
        If ``julia_dim < 1`` (a Julia error; as a Python axis it would mean
        counting from the end, a different call).
    """
    if julia_dim < 1:
        raise ValueError(f"a Julia dim is 1 or more, got {julia_dim}")
    return julia_dim - 1


def _keywords(args: Mapping[str, Any], *names: str) -> dict[str, Any]:
    keywords = {name: args[name] for name in names if name in args}
    if "T" in keywords:
        keywords["T"] = JULIA_TYPES[keywords["T"]]
    return keywords


def _needs_input(call: str, x: np.ndarray | None) -> np.ndarray:
    if x is None:
        raise CaseError(f"a {call} case needs an input array x")
    return x


def run_case(
    api: Any, call: str, args: Mapping[str, Any], x: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Run one case through ``api``; return its outputs by the fixtures' names.

    Parameters
    ----------
    api : module or object
        Anything with this package's public API: ``compute_frequencies``,
        ``RoPE``, ``AbsolutePE``, ``neg_half``, ``create_causal_mask``,
        ``create_padding_mask``, with the same signatures.
    call : str
        One of :data:`CALLS`.
    args : Mapping[str, Any]
        The case's arguments, Julia's keyword names and conventions.
    x : numpy.ndarray or None
        The input, for ``RoPE.apply``, ``AbsolutePE.apply`` and ``neg_half``.

    Returns
    -------
    dict[str, numpy.ndarray]
        ``out``; ``cos_cached`` and ``sin_cached``; ``embeddings``; ``y``;
        or ``mask``, as in the fixtures' manifest.

    Raises
    ------
    CaseError
        For an unknown ``call`` or a missing input.
    Exception
        Whatever ``api`` raises.
    """
    if call == "compute_frequencies":
        out = api.compute_frequencies(args["dim"], args["seq_len"], **_keywords(args, "base"))
        return {"out": out}
    if call in ("RoPE", "RoPE.apply"):
        rope = api.RoPE(args["head_size"], args["seq_len"], **_keywords(args, "base", "scale", "T"))
        if call == "RoPE":
            return {"cos_cached": rope.cos_cached, "sin_cached": rope.sin_cached}
        return {"y": rope(_needs_input(call, x))}
    if call in ("AbsolutePE", "AbsolutePE.apply"):
        layer = api.AbsolutePE(
            args["embedding_size"], args["max_length"], **_keywords(args, "base")
        )
        if call == "AbsolutePE":
            return {"embeddings": layer.embeddings}
        return {"y": layer(_needs_input(call, x))}
    if call == "neg_half":
        return {"y": api.neg_half(_needs_input(call, x), python_axis(args.get("dim", 1)))}
    if call == "create_causal_mask":
        return {"mask": api.create_causal_mask(args["seq_len"])}
    if call == "create_padding_mask":
        return {"mask": api.create_padding_mask(args["lengths"], args["max_len"])}
    raise CaseError(f"unknown parity call {call!r}; expected one of {', '.join(CALLS)}")


def python_call(call: str, args: Mapping[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
    """Run one case with this package (see :func:`run_case`)."""
    import positional_embeddings  # here, not at the top: see the module docstring

    return run_case(positional_embeddings, call, args, x)
