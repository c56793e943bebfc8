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
  A process that only loads this package's code from the cache skips
  Numba's compiler set-up (importing and registering every implementation
  Numba has: about 0.3 s of a cold start, and a larger heap for the
  interpreter's exit to collect), which Numba redoes before any compilation,
  and the import of Numba's array routines that loading a kernel which
  allocates would otherwise do.  Numba's runtime, which it compiles in
  every process, is loaded from the cache too.
- ``nogil``: compiled calls release the GIL, so Python threads (ours, and
  the caller's) run them concurrently.
- Numba's runtime (``_nrt``, which counts references to the arrays compiled
  code holds): set on for every function rather than left to Numba, which
  compiles a function without it when its caller has none, and off for the
  loops the package calls from Python that allocate nothing
  (``JIT_LOOP``).  With the runtime, Numba wraps each array argument in a
  record of its own for the call (an allocation and a release per array)
  and counts references to the views the loop takes; without it, the loop
  takes the arrays as they are.  The functions such a loop calls keep the
  runtime (Numba refuses to compile a function without it that returns a
  view); those that return views are pasted into the loops
  (``inline="always"``): called, each would still count a reference (to
  no record) at every call.
- ``error_model="numpy"``: IEEE results (``1/0 == inf``) instead of Python
  exceptions, as in Julia.
- never ``fastmath``: it allows fused multiply-adds and reassociation, which
  Julia does not do, and would break bit parity.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import re
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["COMPILED_SOURCES", "JIT", "JIT_INLINED", "JIT_LLVM_INLINED", "JIT_LOOP"]

COMPILED_SOURCES = (
    "_atomics.py",
    "_binary16.py",
    "_jit.py",
    "_julia_math.py",
    "_kernels.py",
    "_parallel.py",
)
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


@functools.cache
def _cache_places() -> tuple[str, str]:
    """Where Numba caches this package's code: its sources' ``__pycache__``,
    and the folder it names for their directory in a cache directory of its
    own (``NUMBA_CACHE_DIR``, the user's), as Numba's locators find them."""
    from numba.core.caching import _CacheLocator

    sources = os.path.abspath(os.path.dirname(__file__))
    return os.path.join(sources, "__pycache__"), _CacheLocator.get_suitable_cache_subpath(__file__)


def _ours(cache_path: str) -> bool:
    """Whether a Numba cache path holds this package's code (another
    library's, or a user's, never: whatever the names of its folders)."""
    in_tree, in_cache_directory = _cache_places()
    path = os.path.abspath(cache_path)
    return path == in_tree or os.path.basename(path) == in_cache_directory


_REPLACED = "_positional_embeddings_replaced"
"""Set on the functions that replace Numba's cache methods: this module
replaces them once per process, however often it runs (``importlib.reload``);
replaced twice, entries were saved wrapped twice and a later process, which
unwraps once, gave Numba the wrapper as code."""


def _replaced(*functions: Any) -> None:
    for function in functions:
        setattr(function, _REPLACED, True)


_ELF64_LITTLE_ENDIAN = b"\x7fELF\x02\x01"
_SYMBOL_TABLE = 2  # a section header's type, SHT_SYMTAB


def _undefined_symbols(code: bytes) -> frozenset[str] | None:
    """The names an object file leaves for the linker to resolve, or None
    where it is not a 64-bit little-endian ELF file (the format on Linux;
    others are not read).

    Raises
    ------
    struct.error, IndexError, ValueError, UnicodeDecodeError
        A file cut short or otherwise malformed.
    """
    if not code.startswith(_ELF64_LITTLE_ENDIAN):
        return None
    (headers,) = struct.unpack_from("<Q", code, 0x28)
    size, count = struct.unpack_from("<HH", code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", code, headers + k * size) for k in range(count)]
    names = set()
    for _, kind, _, _, offset, length, strings, _, _, _ in sections:
        if kind != _SYMBOL_TABLE:
            continue
        start = sections[strings][4]
        symbols = struct.iter_unpack("<IBBHQQ", code[offset : offset + length])
        for name, _, _, section, _, _ in symbols:
            if name and section == 0:  # SHN_UNDEF: defined elsewhere
                end = code.index(b"\0", start + name)
                names.add(code[start + name : end].decode())
    return frozenset(names)


def _links_without_set_up(payload: Any) -> bool:
    """Whether a cached compile result (Numba's reduced ``CompileResult``:
    its library first, as ``(name, "object", (machine code, bitcode))``)
    calls only symbols the JIT linker already knows.  An unknown one (of a
    Numba module that only Numba's set-up imports) would abort the process
    when the code is linked; anything this cannot read counts as unknown."""
    from llvmlite.binding import address_of_symbol

    try:
        _, kind, (code, _) = payload[0]
        symbols = _undefined_symbols(code) if kind == "object" else None
    except Exception:
        return False
    return symbols is not None and all(address_of_symbol(s) is not None for s in symbols)


@contextlib.contextmanager
def _environments_without_imports() -> Iterator[None]:
    """Unpickle Numba environments without importing their modules.

    Each function in a cached library has an environment: its module's
    globals, which only object-mode code reads.  Numba rebuilds one on load
    by importing the module, and the code of a kernel that allocates or
    reshapes an array (``np.empty``, ``x.reshape``) holds Numba's own array
    routines, whose module (``numba.np.arrayobj``, with the ones it
    imports) is otherwise imported by the compiler set-up alone: 50-75 ms
    of a cold start on the AVX2 AMD EPYC development machine.  While this is
    active, an environment of a module not yet imported takes this module's
    globals instead (never read: the package compiles nothing in object
    mode).  Numba loads under its compiler lock, so no other load sees the
    change.  A Numba without the function this replaces loads as before.
    """
    from numba.core import environment

    rebuild = getattr(environment, "_rebuild_env", None)
    if rebuild is None:
        yield
        return

    def rebuild_imported(module: str, consts: Any, name: str) -> Any:
        return rebuild(module if module in sys.modules else __name__, consts, name)

    environment._rebuild_env = rebuild_imported
    try:
        yield
    finally:
        environment._rebuild_env = rebuild


def _nrt_file(path: Path, key: str) -> Any:
    """The serialized NRT library saved at ``path`` under ``key``, or None
    where there is none, or it was saved under another key or damaged (its
    digest does not match)."""
    try:
        saved_key, digest, state = pickle.loads(path.read_bytes())
        if saved_key != key or hashlib.sha256(state).hexdigest() != digest:
            return None
        return pickle.loads(state)
    except Exception:  # missing, unreadable, cut short, another format
        return None


def _save_nrt_file(path: Path, key: str, serialized: Any) -> None:
    """Save a serialized NRT library at ``path`` under ``key``, replacing
    the file whole (a reader sees the old file or the new one), readable as
    Numba's own files are (as the umask allows; ``tempfile``'s are their
    owner's alone: the other users of a shared cache could not load it); nothing
    where the directory cannot be written."""
    state = pickle.dumps(serialized)
    entry = pickle.dumps((key, hashlib.sha256(state).hexdigest(), state))
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(8).hex()}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        return
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(entry)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


_PROCESS_NAMES = re.compile(r"(\.const\.pickle(?:data|buf))\.[0-9]+(?![0-9a-f])")
"""Names of constants in Numba's IR that some versions (0.59) derive from
the address of a Python object: not the same from one process to the next."""


@contextlib.contextmanager
def _nrt_cached_in(directory: str) -> Iterator[None]:
    """Initialise Numba's runtime (NRT) from machine code saved in ``directory``.

    Loading cached code needs the runtime, whose few functions Numba
    compiles from LLVM IR in every process: 25-40 ms of a cold start on the
    AVX2 AMD EPYC development machine, 4 ms loaded.  While this is active
    (around ``rtsys.initialize``, which does nothing once the runtime is
    up), the runtime's library is loaded from a file of ``directory`` whose
    key is the Numba and llvmlite versions, the CPU Numba compiles for and
    the module's IR itself (``_PROCESS_NAMES`` aside); where there is none,
    compiled as Numba does, with its machine code kept, and saved there.  A
    Numba without the functions this relies on initialises as before.
    """
    import llvmlite
    import numba
    from numba.core.runtime import nrtdynmod

    compile_nrt = getattr(nrtdynmod, "compile_nrt_functions", None)
    if compile_nrt is None or not hasattr(nrtdynmod, "create_nrt_module"):
        yield
        return

    def load_or_compile(context: Any) -> Any:
        module, library = nrtdynmod.create_nrt_module(context)
        codegen = context.codegen()
        versions = (numba.__version__, llvmlite.__version__, codegen.magic_tuple())
        code = _PROCESS_NAMES.sub(r"\1", str(module))
        key = hashlib.sha256(repr((versions, code)).encode()).hexdigest()
        path = Path(directory) / f"nrt-{key[:16]}.nbc"
        saved = _nrt_file(path, key)
        if saved is not None:
            return codegen.unserialize_library(saved)
        library.enable_object_caching()
        library.add_ir_module(module)
        library.finalize()
        if not library.has_dynamic_globals:  # addresses of this process
            _save_nrt_file(path, key, library.serialize_using_object_code())
        return library

    nrtdynmod.compile_nrt_functions = load_or_compile
    try:
        yield
    finally:
        nrtdynmod.compile_nrt_functions = compile_nrt


def _load_without_set_up() -> None:
    """Load this package's cached code without Numba's compiler set-up.

    Numba's ``Cache.load_overload`` first calls the target context's
    ``refresh``: it imports and registers every implementation Numba has
    (about 0.3 s in a fresh process), which compiling needs and loading
    does not: Numba's compiler refreshes again before any compilation.
    Loading needs the runtime (NRT) initialised, as the refresh does first
    (here from the cache, ``_nrt_cached_in``), and every symbol the code
    calls known to the linker (``_links_without_set_up``; otherwise the
    refresh runs as before).  Other libraries' caches, and
    Numba versions without the methods this relies on, are left as they are.
    """
    from numba.core.caching import Cache
    from numba.core.runtime.nrt import rtsys

    if getattr(Cache.load_overload, _REPLACED, False) or not all(
        hasattr(Cache, name) for name in ("_guard_against_spurious_io_errors", "_index_key")
    ):
        return
    numba_load_overload = Cache.load_overload
    parts = ("_cache_path", "_cache_file", "_impl", "_enabled")

    def load_overload(self: Cache, sig: Any, target_context: Any) -> Any:
        if not (all(hasattr(self, part) for part in parts) and _ours(self._cache_path)):
            return numba_load_overload(self, sig, target_context)
        with _nrt_cached_in(self._cache_path):
            rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            if not self._enabled:
                return None
            with _environments_without_imports():
                data = self._cache_file.load(self._index_key(sig, target_context.codegen()))
            if data is None:
                return None
            if not _links_without_set_up(data):
                target_context.refresh()
            return self._impl.rebuild(target_context, data)

    _replaced(load_overload)
    Cache.load_overload = load_overload  # type: ignore[method-assign]


def _harden_cache_files() -> None:
    """Make Numba treat this package's unusable cache entries as absent.

    Numba's index and data files are pickles; a damaged one makes Numba raise
    from the first call of the function.  A data file is found through the
    index alone: two processes that read the index before either rewrote it
    give their two signatures the same file, and the index can end up
    naming, for one signature, the code of the other.  And the index is
    dropped when the function's own file changes, while a kernel also holds
    the code of the functions it calls from other modules.  And bytes
    damaged inside an entry's compiled code were run (a crash), or refused
    by LLVM at every start.  This package's entries are therefore saved
    with their key, a digest of ``COMPILED_SOURCES`` and one of the entry's
    own pickled bytes, and loaded only if all three match.  Only the places
    where Numba caches this package's code are affected (``_ours``): other
    libraries' caching, and users', is unchanged.
    """
    from numba.core.caching import IndexDataCacheFile

    if getattr(IndexDataCacheFile.save, _REPLACED, False):
        return
    save, load, load_index = (
        IndexDataCacheFile.save,
        IndexDataCacheFile.load,
        IndexDataCacheFile._load_index,
    )

    def keyed_save(self: IndexDataCacheFile, key: Any, data: Any) -> None:
        if not _ours(self._cache_path):
            return save(self, key, data)
        payload = self._dump(data)
        save(self, key, ((key, _sources_digest(), hashlib.sha256(payload).digest()), payload))

    def keyed_load(self: IndexDataCacheFile, key: Any) -> Any:
        if not _ours(self._cache_path):
            return load(self, key)
        try:
            entry = load(self, key)
            if entry is None:
                return None
            saved_key, payload = entry
            if saved_key != (key, _sources_digest(), hashlib.sha256(payload).digest()):
                return None
            return pickle.loads(payload)
        except Exception:  # any damage: unpickling errors, bad versions, short files
            return None

    def tolerant_load_index(self: IndexDataCacheFile) -> Any:
        if not _ours(self._cache_path):
            return load_index(self)
        try:
            return load_index(self)
        except Exception:
            return {}

    _replaced(keyed_save, keyed_load, tolerant_load_index)
    IndexDataCacheFile.save = keyed_save  # type: ignore[method-assign]
    IndexDataCacheFile.load = keyed_load  # type: ignore[method-assign]
    IndexDataCacheFile._load_index = tolerant_load_index  # type: ignore[method-assign]


def _runtime(enabled: bool) -> dict[str, bool]:
    """Numba's option that compiles a function with its runtime or without
    (``_nrt``: private, and in every Numba the package supports), or no
    option where a Numba has none (its runtime then always on)."""
    from numba.core.cpu import CPUTargetOptions

    return {"_nrt": enabled} if hasattr(CPUTargetOptions, "_nrt") else {}


def _require_the_compiler() -> None:
    """Refuse ``NUMBA_DISABLE_JIT=1`` at import, with an ``ImportError``
    that says so: the loops call intrinsics that have no pure-Python form,
    so every constructor failed deep inside Numba (``NotImplementedError``)."""
    from numba.core import config

    if getattr(config, "DISABLE_JIT", False):  # set from the environment at import
        raise ImportError(
            "positional_embeddings needs Numba's compiler, which NUMBA_DISABLE_JIT=1 "
            "turns off (its loops have no pure-Python form); unset NUMBA_DISABLE_JIT"
        )


def _fork_between_compilations() -> None:
    """Make ``os.fork`` wait for a compilation under way in another thread.

    Numba compiles, and loads from its cache, holding one process-wide
    lock.  A child forked while another thread holds it (a team thread
    loading a loop at its first call, a caller's thread compiling) has the
    lock held by a thread the child does not have, and hangs at its first
    compilation.  Before a fork the forking thread takes the lock, as the
    ``logging`` module does with its own; both processes then release it.
    """
    from numba.core.compiler_lock import global_compiler_lock

    if not hasattr(os, "register_at_fork"):  # no fork: Windows
        return
    os.register_at_fork(
        before=global_compiler_lock.acquire,
        after_in_parent=global_compiler_lock.release,
        after_in_child=global_compiler_lock.release,
    )


_require_the_compiler()
_harden_cache_files()
_load_without_set_up()
_fork_between_compilations()

JIT: dict[str, Any] = {
    "cache": _cache_available(),
    "nogil": True,
    "error_model": "numpy",
    **_runtime(True),
}

JIT_LOOP: dict[str, Any] = {**JIT, **_runtime(False)}
"""For the loops the package calls from Python that allocate nothing: compiled
without Numba's runtime (see above).  On the AVX2 AMD EPYC development
machine, a (128, 1, 32) float32 decoding step's compiled call took 0.15-0.4
us less (of 1.1-1.8 us), and the step 5-8% less end to end, alternated in
one process with the loops compiled with the runtime; loops over 8 MB took
as long either way."""

JIT_INLINED: dict[str, Any] = {**JIT, "inline": "always"}
"""For loop bodies shared by several kernels: Numba pastes them into each
caller, where LLVM's inliner would leave the larger ones as calls, and the
caller's loops would then lose their vectorisation and hoisted overlap checks
(measured: the RoPE loops 1.1-3x slower)."""

JIT_LLVM_INLINED: dict[str, Any] = {**JIT, "forceinline": True}
"""For large functions that many loops must inline to vectorise: compiled
once, then pasted by LLVM into each caller (``alwaysinline``), where Numba's
own pasting (``JIT_INLINED``) types and lowers the body again in every
caller."""
