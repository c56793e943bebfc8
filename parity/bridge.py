"""The real PositionalEmbeddings.jl through juliacall, for the live suite and the recorder.

Nothing here imports juliacall, let alone starts Julia, until asked, and
nothing here ever downloads Julia or a Julia package:

- :func:`julia_available` answers at once, from the environment alone: a
  Julia executable (``PYTHON_JULIACALL_EXE``, ``PYTHON_JULIAPKG_EXE``, or
  ``julia`` on the PATH) and an installed juliacall.
- :func:`julia` starts Julia once, with juliapkg and Julia's package manager
  offline (``PYTHON_JULIAPKG_OFFLINE=yes``, ``JULIA_PKG_OFFLINE=true``), one
  Julia thread and Julia's signal handling on, and loads PositionalEmbeddings.
  Offline means the Julia packages must be installed already: see
  :data:`INSTALL_HINT`.
- juliacall must be imported before Numba (both load LLVM).  The
  repository's ``conftest.py`` therefore starts Julia before any test module
  imports the package, where Julia is available; the command line
  (``python -m parity``) starts it before it imports the package.  This
  module and :mod:`parity.calls` import only numpy.

:class:`JuliaPositionalEmbeddings` mirrors this package's Python API on top of
the Julia package: numpy arrays in and out (``BitArray`` comes back as
``bool``), numpy dtypes for ``T``, 0-based axes, integer sequences as
``Vector{Int}``; Julia exceptions become :class:`JuliaCallError`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from .calls import run_case

__all__ = [
    "INSTALL_HINT",
    "PACKAGE_VERSION",
    "JuliaCallError",
    "JuliaLayer",
    "JuliaPositionalEmbeddings",
    "julia",
    "julia_api",
    "julia_available",
    "julia_call",
    "julia_environment",
    "julia_executable",
    "julia_header",
    "start_if_available",
]

PACKAGE_VERSION = "0.6.3"

INSTALL_HINT = (
    "The bridge runs juliapkg offline, so PythonCall and PositionalEmbeddings "
    f"{PACKAGE_VERSION} (declared in positional_embeddings/juliapkg.json) must already be "
    "installed in juliapkg's project. Install them once, online, with your Julia: "
    "PYTHON_JULIAPKG_EXE=/path/to/julia python -c 'import juliapkg; juliapkg.resolve()' "
    "(run from the repository root; this downloads Julia packages, never Julia itself)."
)

_JULIA_TYPE_NAMES = {
    np.dtype(np.float16): "Float16",
    np.dtype(np.float32): "Float32",
    np.dtype(np.float64): "Float64",
    np.dtype(np.int64): "Int64",
    np.dtype(np.bool_): "Bool",
}

_start_failure: str | None = None


class JuliaCallError(Exception):
    """Julia raised an exception.

    Parameters
    ----------
    type_name : str
        The Julia exception's type, e.g. ``"DimensionMismatch"``.
    message : str
        Julia's ``showerror`` text, e.g. ``"DimensionMismatch: ..."``.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.message = message


def julia_executable() -> str | None:
    """The Julia executable the bridge would use, found without running anything.

    Returns
    -------
    str or None
        ``PYTHON_JULIACALL_EXE``, else ``PYTHON_JULIAPKG_EXE``, else ``julia``
        on the PATH; ``None`` if there is none.
    """
    for variable in ("PYTHON_JULIACALL_EXE", "PYTHON_JULIAPKG_EXE"):
        if os.environ.get(variable):
            return os.environ[variable]
    return shutil.which("julia")


def julia_available() -> tuple[bool, str]:
    """Whether the live suite can run, and why not; fast, starts and downloads nothing.

    Returns
    -------
    available : bool
        A Julia executable exists, juliacall is installed and no earlier
        attempt to start Julia failed.
    reason : str
        Where Julia is, or why the live suite cannot run.
    """
    executable = julia_executable()
    if executable is None:
        return False, (
            "no Julia found: set PYTHON_JULIACALL_EXE (or PYTHON_JULIAPKG_EXE) or put julia "
            "(1.10 or newer) on the PATH to run the live parity suite"
        )
    if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        return False, f"the Julia executable {executable} does not exist or cannot run"
    if importlib.util.find_spec("juliacall") is None:
        return False, (
            f"Julia found at {executable}, but juliacall is not installed: pip install '.[parity]'"
        )
    if _start_failure is not None:
        return False, _start_failure
    return True, f"Julia at {executable}"


def julia_environment(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The environment changes made before juliacall is imported.

    Parameters
    ----------
    environ : Mapping[str, str], optional
        The environment to start from (default: ``os.environ``).

    Returns
    -------
    dict[str, str | None]
        Variables to set, or to remove where the value is ``None``: one
        Julia thread, Julia's signal handling, juliapkg and Pkg offline, and
        the executable of :func:`julia_executable` for juliapkg.
        ``PYTHON_JULIACALL_EXE`` without ``PYTHON_JULIACALL_PROJECT`` (which
        juliacall 0.9.28+ refuses) is handed to juliapkg instead.
    """
    environ = os.environ if environ is None else environ
    changes: dict[str, str | None] = {
        "PYTHON_JULIACALL_THREADS": "1",
        "PYTHON_JULIACALL_HANDLE_SIGNALS": "yes",
        "PYTHON_JULIAPKG_OFFLINE": "yes",
        "JULIA_PKG_OFFLINE": "true",
    }
    if environ.get("PYTHON_JULIACALL_EXE") and environ.get("PYTHON_JULIACALL_PROJECT"):
        return changes
    if environ.get("PYTHON_JULIACALL_EXE"):
        changes["PYTHON_JULIAPKG_EXE"] = environ["PYTHON_JULIACALL_EXE"]
        changes["PYTHON_JULIACALL_EXE"] = None
    elif not environ.get("PYTHON_JULIAPKG_EXE"):
        executable = shutil.which("julia", path=environ.get("PATH"))
        if executable is not None:
            changes["PYTHON_JULIAPKG_EXE"] = executable
    return changes


@cache
def julia() -> Any:
    """Start Julia (once), load PositionalEmbeddings and return juliacall's ``Main``.

    Returns
    -------
    juliacall.ModuleValue
        Julia's ``Main`` module, with ``PositionalEmbeddings`` loaded.

    Raises
    ------
    RuntimeError
        If Julia is not available, cannot start, lacks the package, or has
        a version of it other than :data:`PACKAGE_VERSION`.
    """
    global _start_failure
    available, reason = julia_available()
    if not available:
        raise RuntimeError(reason)
    for name, value in julia_environment().items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        from juliacall import Main

        Main.seval("using PositionalEmbeddings")
    except Exception as error:
        _start_failure = (
            f"{reason}, but it could not load PositionalEmbeddings: {error}. {INSTALL_HINT}"
        )
        raise RuntimeError(_start_failure) from error
    version = str(Main.seval("string(pkgversion(PositionalEmbeddings))"))
    if version != PACKAGE_VERSION:
        _start_failure = (
            f"{reason} has PositionalEmbeddings {version}; parity is with {PACKAGE_VERSION}"
        )
        raise RuntimeError(_start_failure)
    return Main


def start_if_available() -> None:
    """Start Julia now if it is available, and never raise.

    For ``conftest.py``, which must import juliacall before anything imports
    Numba.  A failure is remembered: :func:`julia_available` then answers
    ``False`` with the reason, and the live tests skip with it.
    """
    if julia_available()[0]:
        with contextlib.suppress(RuntimeError):
            julia()


def julia_header() -> dict[str, str]:
    """Julia's version, the CPU Julia compiled for, and the package version.

    Returns
    -------
    dict[str, str]
        ``julia_version``, ``cpu``, ``package``, ``package_version``, as in a
        fixtures manifest.
    """
    jl = julia()
    return {
        "julia_version": str(jl.seval("string(VERSION)")),
        "cpu": str(jl.seval("Sys.CPU_NAME")),
        "package": "PositionalEmbeddings.jl",
        "package_version": str(jl.seval("string(pkgversion(PositionalEmbeddings))")),
    }


class JuliaLayer:
    """A Julia ``RoPE`` or ``AbsolutePE``, used like this package's layers.

    Fields read as numpy arrays (or Python numbers); calling it on a numpy
    array calls the Julia layer on a Julia copy of it.
    """

    def __init__(self, api: JuliaPositionalEmbeddings, value: Any) -> None:
        self._api = api
        self._value = value

    def __getattr__(self, name: str) -> Any:
        return self._api.from_julia(getattr(self._value, name))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        result: np.ndarray = self._api.invoke(self._value, x)
        return result


class JuliaPositionalEmbeddings:
    """PositionalEmbeddings.jl behind this package's Python API.

    Same names, arguments and defaults as :mod:`positional_embeddings`
    (0-based ``dim``, numpy dtypes for ``T``), converted for Julia; results
    come back as numpy arrays with Julia's shapes and element types.

    Parameters
    ----------
    main : juliacall.ModuleValue
        Julia's ``Main`` with PositionalEmbeddings loaded (see :func:`julia`).
    """

    def __init__(self, main: Any) -> None:
        self._jl = main
        self._package = main.PositionalEmbeddings

    def julia_type(self, dtype: Any) -> Any:
        """The Julia type of a numpy dtype (or scalar type), e.g. ``Float32``.

        Raises
        ------
        TypeError
            For a dtype without a counterpart here.
        """
        name = _JULIA_TYPE_NAMES.get(np.dtype(dtype))
        if name is None:
            raise TypeError(f"no Julia type for numpy dtype {np.dtype(dtype)}")
        return getattr(self._jl, name)

    def to_julia(self, value: Any) -> Any:
        """A Python value as the Julia argument a Julia user would pass.

        numpy arrays become native Julia ``Array``s with the same shape and
        values (copied, whatever their memory layout); lists and tuples of
        integers become ``Vector{Int}``; numpy scalars keep their type; anything else
        goes as juliacall converts it (int to ``Int``, float to ``Float64``).
        """
        import juliacall

        if isinstance(value, np.ndarray):
            return self._jl.Array(np.asfortranarray(value))
        if isinstance(value, np.generic):
            return juliacall.convert(self.julia_type(value.dtype), value.item())
        if isinstance(value, (list, tuple)) and all(
            isinstance(item, (int, np.integer)) for item in value
        ):
            return juliacall.convert(self._jl.Vector[self._jl.Int], [int(v) for v in value])
        return value

    def from_julia(self, value: Any) -> Any:
        """A Julia result as numpy: arrays copied, ``BitArray`` as ``bool``.

        ``np.asarray`` alone would give an object array for a ``BitArray``.
        """
        jl = self._jl
        if not jl.isa(value, jl.AbstractArray):
            return value
        if jl.isa(value, jl.BitArray):
            value = jl.Array[jl.Bool](value)
        return np.array(value, copy=True)

    def invoke(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """Call a Julia function on converted arguments; convert the result back.

        Raises
        ------
        JuliaCallError
            With the Julia exception's type name and ``showerror`` text.
        """
        from juliacall import JuliaError

        jl = self._jl
        try:
            result = function(
                *(self.to_julia(arg) for arg in args),
                **{key: self.to_julia(value) for key, value in kwargs.items()},
            )
        except JuliaError as error:
            exception = error.exception
            raise JuliaCallError(
                str(jl.nameof(jl.typeof(exception))), str(jl.sprint(jl.showerror, exception))
            ) from None
        return self.from_julia(result)

    def compute_frequencies(self, dim: int, seq_len: int, base: float = 10_000) -> np.ndarray:
        """Julia's ``compute_frequencies(dim, seq_len, base)``."""
        result: np.ndarray = self.invoke(self._package.compute_frequencies, dim, seq_len, base)
        return result

    def RoPE(
        self,
        head_size: int,
        seq_len: int,
        base: float = 10_000,
        scale: float = 1.0,
        *,
        T: Any = np.float32,
    ) -> JuliaLayer:
        """Julia's ``RoPE(head_size, seq_len; base, scale, T)``."""
        rope = self.invoke(
            self._package.RoPE, head_size, seq_len, base=base, scale=scale, T=self.julia_type(T)
        )
        return JuliaLayer(self, rope)

    def AbsolutePE(self, embedding_size: int, max_length: int, base: float = 10_000) -> JuliaLayer:
        """Julia's ``AbsolutePE(embedding_size, max_length; base)``."""
        return JuliaLayer(
            self, self.invoke(self._package.AbsolutePE, embedding_size, max_length, base=base)
        )

    def neg_half(self, x: np.ndarray, dim: int = 0) -> np.ndarray:
        """Julia's ``neg_half(x, dim + 1)``: ``dim`` is a 0-based axis, negative from the end."""
        julia_dim = dim + 1 if dim >= 0 else dim + np.ndim(x) + 1
        result: np.ndarray = self.invoke(self._package.neg_half, x, julia_dim)
        return result

    def create_causal_mask(self, seq_len: int) -> np.ndarray:
        """Julia's ``create_causal_mask(seq_len)``."""
        result: np.ndarray = self.invoke(self._package.create_causal_mask, seq_len)
        return result

    def create_padding_mask(self, lengths: Sequence[int], max_len: int) -> np.ndarray:
        """Julia's ``create_padding_mask(lengths, max_len)``, ``lengths`` as ``Vector{Int}``."""
        result: np.ndarray = self.invoke(self._package.create_padding_mask, lengths, max_len)
        return result


@cache
def julia_api() -> JuliaPositionalEmbeddings:
    """The Julia package behind this package's API, starting Julia if needed."""
    return JuliaPositionalEmbeddings(julia())


def julia_call(call: str, args: Mapping[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
    """Run one case in Julia; return its outputs by the fixtures' names.

    Parameters
    ----------
    call, args, x
        As in :func:`parity.calls.run_case`.

    Returns
    -------
    dict[str, numpy.ndarray]
        Julia's outputs.

    Raises
    ------
    JuliaCallError
        If Julia raised.
    """
    return run_case(julia_api(), call, args, x)
