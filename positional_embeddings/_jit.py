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
  would raise.  So is an entry whose file holds the code of another
  signature, which two processes compiling at once can leave behind (Numba
  rewrites the index without a lock), and one compiled from other sources
  (Numba notices a change of the function's own file, not of the functions
  it calls): Numba alone would run that code.
- ``nogil``: compiled calls release the GIL, so Python threads (ours, and
  the caller's) run them concurrently.
- ``error_model="numpy"``: IEEE results (``1/0 == inf``) instead of Python
  exceptions, as in Julia.
- never ``fastmath``: it allows fused multiply-adds and reassociation, which
  Julia does not do, and would break bit parity.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

__all__ = ["COMPILED_SOURCES", "JIT", "JIT_INLINED"]

COMPILED_SOURCES = ("_atomics.py", "_jit.py", "_julia_math.py", "_kernels.py", "_parallel.py")
"""The package's modules whose code (or compile options) Numba compiles:
a cached function is only as current as all of them."""


def _probe() -> None:
    """A function of this package's directory, to ask Numba where it would cache."""


def _cache_available() -> bool:
    from numba.core.caching import FunctionCache

    try:
        FunctionCache(_probe)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return False
    return True


@functools.cache
def _sources_digest() -> str:
    """SHA-256 of ``COMPILED_SOURCES``' contents, read once per process."""
    digest = hashlib.sha256()
    for name in COMPILED_SOURCES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    return digest.hexdigest()


def _harden_cache_files() -> None:
    """Make Numba treat this package's unusable cache entries as absent.

    Numba's index and data files are pickles; a damaged one makes Numba raise
    from the first call of the function.  A data file is found through the
    index alone: two processes that read the index before either rewrote it
    give their two signatures the same file, and the index can end up
    naming, for one signature, the code of the other.  And the index is
    dropped when the function's own file changes, while a kernel also holds
    the code of the functions it calls from other modules.  This package's
    entries are therefore saved with their key and a digest of
    ``COMPILED_SOURCES``, and loaded only if both match.  Only files under a
    cache path that names this package are affected: other libraries'
    caching is unchanged.
    """
    from numba.core.caching import IndexDataCacheFile

    save, load, load_index = (
        IndexDataCacheFile.save,
        IndexDataCacheFile.load,
        IndexDataCacheFile._load_index,
    )

    def ours(cache_file: IndexDataCacheFile) -> bool:
        return "positional_embeddings" in str(cache_file._cache_path)

    def keyed_save(self: IndexDataCacheFile, key: Any, data: Any) -> None:
        save(self, key, ((key, _sources_digest()), data) if ours(self) else data)

    def keyed_load(self: IndexDataCacheFile, key: Any) -> Any:
        if not ours(self):
            return load(self, key)
        try:
            entry = load(self, key)
            if entry is None:
                return None
            saved_key, data = entry
            return data if saved_key == (key, _sources_digest()) else None
        except Exception:  # any damage: unpickling errors, bad versions, short files
            return None

    def tolerant_load_index(self: IndexDataCacheFile) -> Any:
        if not ours(self):
            return load_index(self)
        try:
            return load_index(self)
        except Exception:
            return {}

    IndexDataCacheFile.save = keyed_save  # type: ignore[method-assign]
    IndexDataCacheFile.load = keyed_load  # type: ignore[method-assign]
    IndexDataCacheFile._load_index = tolerant_load_index  # type: ignore[method-assign]


_harden_cache_files()

JIT: dict[str, Any] = {"cache": _cache_available(), "nogil": True, "error_model": "numpy"}

JIT_INLINED: dict[str, Any] = {**JIT, "inline": "always"}
"""For loop bodies shared by several kernels: Numba pastes them into each
caller, where LLVM's inliner would leave the larger ones as calls, and the
caller's loops would then lose their vectorisation and hoisted overlap checks
(measured: the RoPE loops 1.1-3x slower)."""
