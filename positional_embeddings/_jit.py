"""Numba compile options for every compiled function of the package, in one place.

- ``cache``: compiled code is written next to the sources (or Numba's
  user-wide cache directory, or ``NUMBA_CACHE_DIR``) so later processes start
  without compiling.  Where no such place is writable (a read-only install
  with no writable home), Numba would refuse to compile cached functions at
  all; the package then compiles in memory, once per process, and says
  nothing.
  A stale or corrupt cache file of this package (truncated by a crash,
  overwritten, left by another Numba version) is treated as missing: the
  function is compiled again and the entry rewritten, where Numba alone
  would raise.
- ``nogil``: compiled calls release the GIL, so Python threads (ours, and
  the caller's) run them concurrently.
- ``error_model="numpy"``: IEEE results (``1/0 == inf``) instead of Python
  exceptions, as in Julia.
- never ``fastmath``: it allows fused multiply-adds and reassociation, which
  Julia does not do, and would break bit parity.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JIT", "JIT_INLINED"]


def _probe() -> None:
    """A function of this package's directory, to ask Numba where it would cache."""


def _cache_available() -> bool:
    from numba.core.caching import FunctionCache

    try:
        FunctionCache(_probe)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return False
    return True


def _tolerate_broken_cache_files() -> None:
    """Make Numba treat this package's unreadable cache files as absent.

    Numba's index and data files are pickles; a damaged one makes Numba raise
    from the first call of the function.  Only files under a cache path that
    names this package are affected: other libraries' caching is unchanged.
    """
    from numba.core.caching import IndexDataCacheFile

    load, load_index = IndexDataCacheFile.load, IndexDataCacheFile._load_index

    def tolerant(method: Any, missing: Any) -> Any:
        def wrapper(self: IndexDataCacheFile, *args: Any) -> Any:
            if "positional_embeddings" not in str(self._cache_path):
                return method(self, *args)
            try:
                return method(self, *args)
            except Exception:  # any damage: unpickling errors, bad versions, short files
                return missing

        return wrapper

    IndexDataCacheFile.load = tolerant(load, None)  # type: ignore[method-assign]
    IndexDataCacheFile._load_index = tolerant(load_index, {})  # type: ignore[method-assign]


_tolerate_broken_cache_files()

JIT: dict[str, Any] = {"cache": _cache_available(), "nogil": True, "error_model": "numpy"}

JIT_INLINED: dict[str, Any] = {**JIT, "inline": "always"}
"""For loop bodies shared by several kernels: Numba pastes them into each
caller, where LLVM's inliner would leave the larger ones as calls, and the
caller's loops would then lose their vectorisation and hoisted overlap checks
(measured: the RoPE loops 1.1-3x slower)."""
