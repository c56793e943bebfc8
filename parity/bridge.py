"""Julia through juliacall, for the live suite and the recorder.

Nothing here starts Julia, or even imports juliacall, until it is asked to,
and never where no Julia executable exists: ``julia_available`` looks for
``PYTHON_JULIACALL_EXE`` / ``PYTHON_JULIAPKG_EXE`` or ``julia`` on the PATH
and answers at once.  When Julia is started, juliapkg runs offline (it must
not download Julia or a registry), with one Julia thread and Julia's signal
handling on, and juliacall is imported before Numba (see the repository's
``conftest.py``) since both load LLVM.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "JuliaCallError",
    "julia",
    "julia_available",
    "julia_call",
    "julia_environment",
    "julia_executable",
    "julia_version",
]

JULIA_PROJECT = Path(__file__).resolve().parents[1] / "positional_embeddings" / "juliapkg.json"


class JuliaCallError(Exception):
    """Julia raised: its exception's type name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def julia_executable() -> str | None:
    """The Julia to use: ``PYTHON_JULIACALL_EXE``, ``PYTHON_JULIAPKG_EXE``, or ``julia`` on PATH."""
    for variable in ("PYTHON_JULIACALL_EXE", "PYTHON_JULIAPKG_EXE"):
        if os.environ.get(variable):
            return os.environ[variable]
    return shutil.which("julia")


def julia_available() -> tuple[bool, str]:
    """Whether the live suite can run, and if not, why (fast: starts nothing)."""
    executable = julia_executable()
    if executable is None:
        return False, (
            "no Julia found: set PYTHON_JULIACALL_EXE or put julia (1.10) on the PATH "
            "to run the live parity suite"
        )
    if importlib.util.find_spec("juliacall") is None:  # importing it would start Julia
        return False, "juliacall is not installed: pip install '.[parity]'"
    return True, f"Julia at {executable}"


def julia_environment() -> dict[str, str]:
    """Environment for juliacall: offline package resolution, one thread, signals on."""
    environment = {
        "PYTHON_JULIACALL_THREADS": "1",
        "PYTHON_JULIACALL_HANDLE_SIGNALS": "yes",
        "PYTHON_JULIAPKG_OFFLINE": "yes",
        "JULIA_PKG_OFFLINE": "true",
    }
    executable = julia_executable()
    if executable is not None:
        environment["PYTHON_JULIAPKG_EXE"] = executable
    return environment


@cache
def julia() -> Any:
    """Start Julia (once) with PositionalEmbeddings loaded; return juliacall's ``Main``."""
    available, reason = julia_available()
    if not available:
        raise RuntimeError(reason)
    for name, value in julia_environment().items():
        os.environ.setdefault(name, value)
    from juliacall import Main

    Main.seval("using PositionalEmbeddings")
    return Main


def julia_version() -> dict[str, str]:
    """Julia's version, its CPU name and the package's version, for fixture headers."""
    jl = julia()
    return {
        "julia_version": str(jl.seval("string(VERSION)")),
        "cpu": str(jl.seval("Sys.CPU_NAME")),
        "package": "PositionalEmbeddings.jl",
        "package_version": str(jl.seval("string(pkgversion(PositionalEmbeddings))")),
    }


def _to_julia_array(jl: Any, x: np.ndarray | None) -> Any:
    """A native Julia Array with x's shape and values (juliacall reads numpy strides)."""
    if x is None:
        raise ValueError("this call needs an input array")
    return jl.Array(x)


def _to_numpy(jl: Any, value: Any) -> np.ndarray:
    """A Julia array as numpy: BitArrays as bool (``np.asarray`` alone gives objects)."""
    if bool(jl.isa(value, jl.BitArray)):
        return np.array(jl.Array[jl.Bool](value), dtype=bool)
    return np.array(value)


def julia_call(call: str, args: dict[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
    """Run one case in Julia; return its outputs by the fixtures' names.

    Raises ``JuliaCallError`` with the Julia exception's type and message.
    """
    from juliacall import JuliaError

    jl = julia()
    package = jl.PositionalEmbeddings
    keywords = {key: value for key, value in args.items() if key in ("base", "scale")}
    if "T" in args:
        keywords["T"] = getattr(jl, args["T"])
    try:
        if call == "compute_frequencies":
            out = package.compute_frequencies(args["dim"], args["seq_len"], args["base"])
            return {"out": _to_numpy(jl, out)}
        if call in ("RoPE", "RoPE.apply"):
            rope = package.RoPE(args["head_size"], args["seq_len"], **keywords)
            if call == "RoPE":
                return {
                    "cos_cached": _to_numpy(jl, rope.cos_cached),
                    "sin_cached": _to_numpy(jl, rope.sin_cached),
                }
            return {"y": _to_numpy(jl, rope(_to_julia_array(jl, x)))}
        if call in ("AbsolutePE", "AbsolutePE.apply"):
            layer = package.AbsolutePE(args["embedding_size"], args["max_length"], **keywords)
            if call == "AbsolutePE":
                return {"embeddings": _to_numpy(jl, layer.embeddings)}
            return {"y": _to_numpy(jl, layer(_to_julia_array(jl, x)))}
        if call == "neg_half":
            return {"y": _to_numpy(jl, package.neg_half(_to_julia_array(jl, x), args["dim"]))}
        if call == "create_causal_mask":
            return {"mask": _to_numpy(jl, package.create_causal_mask(args["seq_len"]))}
        if call == "create_padding_mask":
            lengths = jl.Vector[jl.Int](list(args["lengths"]))
            return {"mask": _to_numpy(jl, package.create_padding_mask(lengths, args["max_len"]))}
    except JuliaError as error:
        exception = error.exception
        raise JuliaCallError(
            str(jl.nameof(jl.typeof(exception))), str(jl.sprint(jl.showerror, exception))
        ) from None
    raise ValueError(f"unknown parity call {call!r}")
