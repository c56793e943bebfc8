"""Threads, processes, Numba caches, import cost and memory: what users rely on."""

from __future__ import annotations

import ast
import copy
import copyreg
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from positional_embeddings import AbsolutePE, LearnedPE, RelativePE, RoPE, _jit, _parallel, _views
from positional_embeddings._direct import DirectCalls

from comparisons import assert_bitwise_equal

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300, **kwargs):
    """Run ``code`` in a fresh interpreter that imports this checkout; return the result."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def copy_package(site: Path) -> Path:
    """A copy of the package's sources (no caches) in ``site``; returns ``site``."""
    shutil.copytree(
        ROOT / "positional_embeddings",
        site / "positional_embeddings",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return site


# --- threads -------------------------------------------------------------------------


def test_concurrent_calls_from_many_threads(monkeypatch):
    """16 threads x 1,000 calls on shared encodings, each call itself split
    over the pool threads: allocating, and in place on each thread's own
    array (decoding steps too, through the remembered direct call)."""
    monkeypatch.setattr(_parallel, "MIN_BYTES_PER_THREAD", 1024)
    rope, pe = RoPE(32, 64), AbsolutePE(32, 64)
    x_rope = np.random.default_rng(0).standard_normal((32, 64, 4)).astype(np.float32)
    x_pe = np.asfortranarray(x_rope.transpose(1, 0, 2))
    x_step = np.ascontiguousarray(x_rope[:, :1])
    expected = rope(x_rope), pe(x_pe), rope(x_step, offset=9)
    failures: list[str] = []

    def worker(index: int) -> None:
        cases = [(rope, x_rope, {}, expected[0]), (pe, x_pe, {}, expected[1])]
        cases.append((rope, x_step, {"offset": 9}, expected[2]))
        layer, x, options, want = cases[index % 3]
        mine = x.copy(order="K")
        for call in range(1000):
            if call % 2:
                mine[...] = x
                got = layer(mine, out=mine, **options)
            else:
                got = layer(x, **options)
            if not np.array_equal(got, want):
                failures.append(f"thread {index} got a different result")
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    assert not failures


def test_a_table_copy_stored_by_another_thread_meanwhile_is_not_read(monkeypatch):
    """AbsolutePE keeps a position-major copy of its table, grown for the
    positions a call reads.  Another thread may store a shorter copy (grown
    from the copy it saw before) just after this one stores its own: the
    call must read the copy it made, not the attribute again, whose
    positions may end before the call's (its loops do not check bounds).
    Here that thread's store is simulated by the attribute's setter."""
    pe = AbsolutePE(8, 100)
    x = np.ones((1, 8, 32), np.float32)  # C order, ids per column: the position-major copy
    ids = np.full((1, 32), 99)
    expected = copy.deepcopy(pe)(x, positions=ids)
    slot = AbsolutePE._by_position

    class StoredMeanwhile:
        def __get__(self, layer, owner=None):
            return slot.__get__(layer, owner)

        def __set__(self, layer, kept):
            slot.__set__(layer, kept)
            slot.__set__(layer, _views.grown_copy(None, layer._embeddings, 1, "F"))

    monkeypatch.setattr(AbsolutePE, "_by_position", StoredMeanwhile())
    assert_bitwise_equal(pe(x, positions=ids), expected)


def test_numba_threading_layer_is_never_started():
    """Work is split by plain threads over nogil kernels: no Numba parallel
    backend (whose default layer aborts on concurrent launches) ever starts."""
    result = run_python(
        """
        import numpy as np
        from numba.np.ufunc import parallel
        from positional_embeddings import RoPE, AbsolutePE
        RoPE(128, 4096)(np.ones((128, 4096, 8), np.float32))
        AbsolutePE(512, 2048)(np.ones((2048, 512, 2), np.float32))
        print(parallel._is_initialized)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# --- processes -----------------------------------------------------------------------


def _rope_in_child(seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((64, 512, 16)).astype(np.float32)
    return RoPE(64, 512)(x)


# Python 3.12 and later warn at a fork in any process with threads (the
# parent's team; pytest-xdist's own).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pools_after_the_parent_used_the_library(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    expected = [_rope_in_child(seed) for seed in range(3)]  # starts the parent's thread pool
    context = multiprocessing.get_context(method)
    with context.Pool(2) as pool:
        results = pool.map_async(_rope_in_child, range(3)).get(timeout=300)
    for got, want in zip(results, expected, strict=False):
        assert_bitwise_equal(got, want)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_fork_waits_for_a_compilation_in_another_thread():
    """A fork while another thread compiles (a team thread loading a loop
    at its first call, say) left the child with Numba's compiler lock held
    by a thread it does not have: its first compilation hung.  The fork now
    waits until the lock is free.  The other thread here holds the lock as
    a compilation does; the child compiles a function of its own."""
    result = run_python(
        """
        import os, threading, time
        import numba
        from numba.core.compiler_lock import global_compiler_lock
        import positional_embeddings

        held = threading.Event()

        def compiling():
            with global_compiler_lock:
                held.set()
                time.sleep(0.5)

        threading.Thread(target=compiling).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            os._exit(numba.njit(lambda: 7)())
        for _ in range(200):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print(os.waitstatus_to_exitcode(status))
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            print("hung")
        """,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["7"]


def test_used_encodings_pickle_and_copy():
    """Models are saved and sent to worker processes after use: every encoding
    object pickles (with every protocol) and copies once called (remembered
    compiled calls stay behind), and the copy gives the same bits."""
    rope = RoPE(8, 40)
    decode = np.ones((8, 1, 3), np.float32)
    one_column = np.ones((8, 20, 1), np.float32)  # keeps C-order copies of the tables
    pe = AbsolutePE(8, 40)
    batch_last = np.ones((20, 8, 16), np.float32)  # keeps a position-major table
    learned, relative = LearnedPE(40, 8, seed=0), RelativePE(8, 4)
    calls = [
        (rope, lambda r: r(decode, offset=3)),
        (rope, lambda r: r(one_column, offset=5)),
        (rope, lambda r: r.backward(decode, offset=7)),
        (pe, lambda p: p(batch_last, offset=2)),
        (pe, lambda p: p(decode.transpose(1, 0, 2), offset=9)),  # remembers its loop
        (learned, lambda layer: layer(batch_last[:, :, :2])),
        (learned, lambda layer: layer(decode.transpose(1, 0, 2), offset=9)),  # remembers too
        (relative, lambda layer: layer(5, 6)),
    ]
    for layer, call in calls:
        call(layer)
    protocols = range(pickle.HIGHEST_PROTOCOL + 1)
    for layer, call in calls:
        pickled = [pickle.loads(pickle.dumps(layer, protocol)) for protocol in protocols]
        for twin in (*pickled, copy.deepcopy(layer), copy.copy(layer)):
            assert_bitwise_equal(call(twin), call(layer))
            assert repr(twin) == repr(layer)
    for twin in (pickle.loads(pickle.dumps(rope)), copy.deepcopy(rope)):
        assert not twin.cos_cached.flags.writeable and not twin.sin_cached.flags.writeable
    for twin in (pickle.loads(pickle.dumps(pe)), copy.deepcopy(pe)):  # were writeable
        assert not twin.embeddings.flags.writeable


@pytest.mark.parametrize("make", [partial(RoPE, 8, 6), partial(AbsolutePE, 8, 6)])
def test_tables_unpickled_from_out_of_band_buffers_are_the_layer_s_own(make):
    """Pickle's out-of-band buffers (protocol 5) are the caller's, and may
    be writeable: the unpickled layer's tables are copies, so writing the
    buffers changes neither them nor its calls in any layout (its calls
    read copies of the tables, which would then disagree with them)."""
    layer = make()
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(layer, protocol=5, buffer_callback=buffers.append)
    raw = [bytearray(buffer.raw()) for buffer in buffers]
    assert raw  # the tables went out of band
    twin = pickle.loads(data, buffers=raw)
    x = np.ones((8, 6, 3) if isinstance(layer, RoPE) else (6, 8, 3), np.float32)
    expected = [layer(x), layer(np.asfortranarray(x))]
    for buffer in raw:
        buffer[:] = bytes(len(buffer))  # every table entry 0
    assert_bitwise_equal(twin(x), expected[0])
    assert_bitwise_equal(twin(np.asfortranarray(x)), expected[1])
    for table in ("cos_cached", "sin_cached", "embeddings"):
        if hasattr(layer, table):
            assert_bitwise_equal(getattr(twin, table), getattr(layer, table))


@pytest.mark.parametrize("make", [partial(LearnedPE, 6, 8), partial(RelativePE, 2, 8)])
def test_trainable_tables_unpickled_from_out_of_band_buffers_view_them(make):
    """A trainable table is held as given (``from_table``): unpickled from
    out-of-band buffers it views them, as a numpy array unpickled from them
    does, and the layer's calls read what is written there."""
    layer = make(seed=0)
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(layer, protocol=5, buffer_callback=buffers.append)
    raw = [bytearray(buffer.raw()) for buffer in buffers]
    assert len(raw) == 1
    twin = pickle.loads(data, buffers=raw)
    assert_bitwise_equal(twin.embeddings, layer.embeddings)
    raw[0][:] = bytes(len(raw[0]))  # every table entry 0
    assert not twin.embeddings.any()
    if isinstance(twin, LearnedPE):
        x = np.ones((6, 8, 3), np.float32)
        twin(x)  # remembered, then the buffer written again
        raw[0][:] = np.ones(len(raw[0]) // 4, np.float32).tobytes()
        assert_bitwise_equal(twin(x), np.full_like(x, 2))


class _Pickled:
    """Pickles as a ``cls`` whose state is ``state``: as another version of
    the package pickled it, or as a damaged pickle holds it.  The package
    pickled a LearnedPE or RelativePE before they had a ``__getstate__``
    with Python's state of their slots, ``(None, slots)``."""

    def __init__(self, cls: type, state: object) -> None:
        self.cls, self.state = cls, state

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # what pickle takes the object for
        return self.cls

    def __reduce_ex__(self, protocol: int) -> tuple:
        return copyreg.__newobj__, (self.cls,), self.state


def test_encodings_pickled_before_their_getstate_load():
    """Pickles of trainable encodings saved by the package before (their
    slots' state) load, with the same table, checked as an assigned one."""
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    old = {
        LearnedPE: {"_direct": DirectCalls(), "_direct_layout": (), "_embeddings": table},
        RelativePE: {"_embeddings": table},
    }
    for cls, slots in old.items():
        for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
            layer = pickle.loads(pickle.dumps(_Pickled(cls, (None, slots)), protocol))
            assert type(layer) is cls
            assert_bitwise_equal(layer.embeddings, table)
    bad = _Pickled(LearnedPE, (None, {"_embeddings": table.astype(np.int32)}))
    with pytest.raises(TypeError, match="embeddings"):
        pickle.loads(pickle.dumps(bad, 2))


def _with_state(layer: object, **changes: object) -> _Pickled:
    """``layer`` pickled with its state's fields changed (None: left out)."""
    state = {**layer.__getstate__(), **changes}
    return _Pickled(type(layer), {k: v for k, v in state.items() if v is not None})


_DAMAGED_STATES = [
    (_with_state(RoPE(8, 6), head_size=16), ValueError, r"shape \(head_size=16"),
    (_with_state(RoPE(8, 6), head_size=4), ValueError, r"shape \(head_size=4"),
    (_with_state(RoPE(8, 6), head_size=8.0), TypeError, "head_size"),
    (_with_state(RoPE(8, 6), interleaved=1), TypeError, "interleaved must be True or False"),
    (_with_state(RoPE(8, 6), sin_cached=np.zeros((8, 5), np.float32)), ValueError, "same shape"),
    (_with_state(RoPE(8, 6), sin_cached=np.zeros((8, 6))), TypeError, "same dtype"),
    (
        _with_state(RoPE(7, 6, interleaved=True), sin_cached=np.ones((7, 6), np.float32)),
        ValueError,
        r"sin_cached\[6\] must be 0.0",
    ),
    (_with_state(RoPE(8, 6), cos_cached=None), ValueError, "RoPE.*lacks cos_cached"),
    (_Pickled(RoPE, [8, 6]), TypeError, "RoPE.*dict.*got list"),
    (
        _with_state(AbsolutePE(8, 6), max_length=10**6),
        ValueError,
        r"embeddings must have shape \(embedding_size=8, max_length=1000000\), got \(8, 6\)",
    ),
    (_with_state(AbsolutePE(8, 6), embedding_size=4), ValueError, r"embedding_size=4"),
    (_with_state(AbsolutePE(8, 6), embedding_size=-8), ValueError, "embedding_size"),
    (_with_state(AbsolutePE(8, 6), embeddings=np.zeros((8, 6))), TypeError, "float32.*float64"),
    (_with_state(AbsolutePE(8, 6), embeddings=np.zeros(48, np.float32)), ValueError, r"\(48,\)"),
    (
        _with_state(AbsolutePE(4, 6), embedding_size=3, embeddings=np.zeros((3, 6), np.float32)),
        ValueError,
        "even",
    ),
    (_with_state(AbsolutePE(8, 6), max_length=None), ValueError, "AbsolutePE.*lacks max_length"),
    (_with_state(LearnedPE(6, 8), embeddings=None), ValueError, "LearnedPE.*lacks embeddings"),
    (_Pickled(RelativePE, "table"), TypeError, "RelativePE.*dict.*got str"),
]


@pytest.mark.parametrize(("pickled", "error", "message"), _DAMAGED_STATES)
def test_damaged_pickled_states_are_refused(pickled, error, message):
    """A pickled state that describes no layer (another version's, or a
    damaged one) is refused with what was expected and what came: not
    unpickled into a layer whose sizes disagree with its tables, which
    reads rows beyond them or reports sizes it does not have."""
    data = pickle.dumps(pickled, 2)
    with pytest.raises(error, match=message):
        pickle.loads(data)


def test_unpickled_rope_checks_whether_partner_rows_are_equal():
    """Whether partner rows hold equal bits (one row of each table then
    read per pair) is found from the unpickled tables, not taken from the
    pickle: a state that claims so for tables where it is not so still
    rotates each channel by its own row."""
    rng = np.random.default_rng(0)
    layer = RoPE.from_tables(8, rng.random((8, 6), np.float32), rng.random((8, 6), np.float32))
    x = rng.random((8, 6, 3), np.float32)
    twin = pickle.loads(pickle.dumps(_with_state(layer, shared=True)))
    assert_bitwise_equal(twin(x), layer(x))
    assert_bitwise_equal(twin.backward(x), layer.backward(x))


# --- Numba's cache -------------------------------------------------------------------

COMPILERS = {"numba", "llvmlite"}

SMOKE = """
import numpy as np
from positional_embeddings import RoPE, AbsolutePE
y = RoPE(8, 4)(np.ones((8, 4, 2), np.float32))
z = AbsolutePE(8, 4)(np.ones((4, 8, 2)))
print(float(y.sum()), float(z.sum()))
"""


def _smoke_answer() -> str:
    y = RoPE(8, 4)(np.ones((8, 4, 2), np.float32))
    z = AbsolutePE(8, 4)(np.ones((4, 8, 2)))
    return f"{float(y.sum())} {float(z.sum())}"


def _damaged(data: bytes, damage: str) -> bytes:
    """``data`` as garbage, cut short, or with 16 bytes flipped at ``damage``
    (a fraction of its length, as text)."""
    if damage == "garbage":
        return b"garbage"
    if damage == "truncated":
        return data[:5]
    start = int(len(data) * float(damage))
    return data[:start] + bytes(b ^ 0xFF for b in data[start : start + 16]) + data[start + 16 :]


def test_damaged_cache_directory(tmp_path):
    """An empty cache directory fills; one whose files are garbage, cut
    short, or whose compiled code has bytes flipped inside is compiled
    over, silently.  (The filled one, damaged in copies: each run compiles
    from nothing.)  Flipped bytes in the code ran it (a segfault), or made
    LLVM refuse it at every later start."""
    filled = tmp_path / "missing"
    for damage in ("missing", "garbage", "truncated", "0.2", "0.5"):
        cache = tmp_path / damage
        if damage != "missing":
            shutil.copytree(filled, cache)
            flipped = damage[0].isdigit()
            for path in (p for p in cache.rglob("*") if p.is_file()):
                if not flipped or path.suffix == ".nbc":
                    path.write_bytes(_damaged(path.read_bytes(), damage))
        result = run_python(SMOKE, {"NUMBA_CACHE_DIR": str(cache)})
        assert result.returncode == 0, (damage, result.stderr)
        assert result.stdout.split() == _smoke_answer().split(), damage
        assert "Error" not in result.stderr and "Warning" not in result.stderr, damage
        assert [p for p in cache.rglob("*") if p.is_file()], damage


DISPATCHERS = """
import numba
from positional_embeddings import _binary16, _julia_math, _kernels
dispatchers = {
    name: value
    for module in (_binary16, _kernels, _julia_math)
    for name, value in vars(module).items()
    if isinstance(value, numba.core.dispatcher.Dispatcher)
}
"""
"""Script lines that bind ``dispatchers``: the compiled functions of ``_binary16``,
``_kernels`` and ``_julia_math``, by name."""

CACHE_MISSES = "sum(sum(d.stats.cache_misses.values()) for d in dispatchers.values())"
"""After ``DISPATCHERS``: how many compilations the cache did not spare."""


def two_dtypes(dtypes: str) -> str:
    """A script: RoPE on arrays of ``dtypes`` in turn (a hash of each result),
    then how many compilations the cache did not spare."""
    rope_on_each = f"""
import hashlib
import numpy as np
from positional_embeddings import RoPE
rope = RoPE(8, 4)
for dtype in {dtypes}:
    print(hashlib.sha256(rope(np.arange(64, dtype=dtype).reshape(8, 4, 2)).tobytes()).hexdigest())
"""
    return rope_on_each + DISPATCHERS + f"print('compiled', {CACHE_MISSES})"


def test_cache_entry_of_another_signature_is_compiled_over(tmp_path):
    """Two processes compiling at once with one cache can leave an index entry
    naming a data file that holds another signature's code (Numba reads,
    changes and rewrites the index without a lock, and numbers data files by
    what it read).  Such an entry is compiled over: never run on arrays of
    another type (which gave a TypingError in CI, or wrong numbers); the
    entries written then are loaded by the next process."""
    cache = tmp_path / "cache"
    environment = {"NUMBA_CACHE_DIR": str(cache)}
    first = run_python(two_dtypes("(np.float32, np.float64)"), environment)
    assert first.returncode == 0, first.stderr
    rotated = 0
    for index in cache.rglob("*.nbi"):
        data = sorted(index.parent.glob(index.name[: -len("nbi")] + "*.nbc"))
        contents = [path.read_bytes() for path in data]
        for path, content in zip(data, contents[1:] + contents[:1], strict=True):
            path.write_bytes(content)
        rotated += len(data) > 1
    assert rotated, "no function was compiled for both types"
    second = run_python(two_dtypes("(np.float64, np.float32)"), environment)
    third = run_python(two_dtypes("(np.float64, np.float32)"), environment)
    for run in (second, third):
        assert run.returncode == 0, run.stderr
        assert "Error" not in run.stderr and "Warning" not in run.stderr
        assert run.stdout.splitlines()[:2] == first.stdout.splitlines()[1::-1]
    compiled = [int(run.stdout.split()[-1]) for run in (first, second, third)]
    assert compiled[0] > 0 and compiled[1] > 0 and compiled[2] == 0, compiled


def test_cache_written_after_reloading_the_package_loads_in_a_plain_process(tmp_path):
    """Reloading ``_jit`` (``importlib.reload``, IPython's autoreload) runs
    its changes to Numba's cache classes again; installed twice, they saved
    each entry wrapped twice, which a process that installed them once
    handed to Numba as code: TypeError from every later process's first
    call, until the sources changed.  They install once per process."""
    environment = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    reload = "import importlib\nfrom positional_embeddings import _jit\nimportlib.reload(_jit)\n"
    reloaded = run_python(reload + SMOKE, environment)
    plain = run_python(SMOKE + DISPATCHERS + f"print({CACHE_MISSES})", environment)
    for run in (reloaded, plain):
        assert run.returncode == 0, run.stderr
        assert run.stdout.split()[:2] == _smoke_answer().split()
    assert plain.stdout.split()[2] == "0"


def test_cache_entries_follow_every_compiled_source(tmp_path):
    """Numba invalidates a cached function when its own file changes, not
    when a function it calls changes in another file: the table kernels of
    ``_kernels.py`` inline ``_julia_math.py``'s cosine.  Edited there alone,
    the next process computes what a process with an empty cache does."""
    site = copy_package(tmp_path / "site")
    probe = "from positional_embeddings import RoPE; print(RoPE(8, 40).cos_cached.tolist())"

    def run(cache: Path) -> str:
        environment = {"PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(cache)}
        result = run_python(probe, environment, cwd=tmp_path)  # not this checkout's copy
        assert result.returncode == 0, result.stderr
        return result.stdout

    before = run(tmp_path / "cache")
    math = site / "positional_embeddings" / "_julia_math.py"
    cosine = "y2 * -0.499999997251031"  # in the Float32 cosine's polynomial
    assert math.read_text().count(cosine) == 1
    math.write_text(math.read_text().replace(cosine, "y2 * -0.25"))
    after = run(tmp_path / "cache")
    assert after == run(tmp_path / "empty") != before


def _imported(module: Path) -> set[str]:
    """The top-level packages a module imports, anywhere in it."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_compiled_sources_are_every_module_that_uses_numba():
    modules = (ROOT / "positional_embeddings").glob("*.py")
    users = {module.name for module in modules if _imported(module) & COMPILERS}
    assert set(_jit.COMPILED_SOURCES) == users


COUNTED_REFRESHES = """
from numba.core.base import BaseContext
refreshes = []
refresh = BaseContext.refresh
def counted(context):
    refreshes.append(context)
    refresh(context)
BaseContext.refresh = counted
"""
"""Script lines that count the calls of Numba's compiler set-up (``refreshes``)."""


def test_only_the_packages_own_cache_places_count_as_its_own(tmp_path, monkeypatch):
    """The package's handling of Numba's cache (keyed entries, loading
    without the compiler set-up) applies to where Numba caches the
    package's code, never to another cache whose path merely names the
    package (a user's project ``positional_embeddings_demo``, a cache
    directory ``positional_embeddings_cache``): such code cached in a
    process that imported the package failed to load in one that did not."""
    from numba.core.caching import _CacheLocator

    here = Path(_jit.__file__).parent
    assert _jit._ours(str(here / "__pycache__"))
    assert _jit._ours(str(tmp_path / _CacheLocator.get_suitable_cache_subpath(_jit.__file__)))
    demo = tmp_path / "positional_embeddings_demo" / "demo_of_a_user.py"
    demo.parent.mkdir()
    demo.write_text("import numba\n@numba.njit(cache=True)\ndef f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(demo.parent))
    user = __import__("demo_of_a_user").f
    assert not _jit._ours(user._cache._cache_path)
    assert not _jit._ours(str(demo.parent / "__pycache__"))
    elsewhere = tmp_path / "positional_embeddings_cache"
    assert not _jit._ours(str(elsewhere / _CacheLocator.get_suitable_cache_subpath(str(demo))))


@pytest.mark.skipif(not _jit.JIT["cache"], reason="no writable Numba cache here")
@pytest.mark.parametrize("linkable", [True, False])
def test_cached_code_runs_without_numbas_compiler_set_up(linkable):
    """A fresh process that finds its kernels in the cache skips Numba's
    compiler set-up (about 0.3 s of a cold start) and computes the same; so
    does one whose cached code is taken to call symbols only the set-up
    makes known, after the set-up.  Without the set-up, loading imports no
    module of Numba's that only the set-up imports, though the smoke test's
    kernels hold Numba's array routines (``np.empty_like`` in AbsolutePE's
    table, a reshape in RoPE's loop for a batch of 2): their module's
    environments are rebuilt without it (``_environments_without_imports``)."""
    answer = _smoke_answer()  # compiled into the cache, or found there
    unlinkable = "" if linkable else "_jit._links_without_set_up = lambda payload: False\n"
    patch = "from positional_embeddings import _jit\n" + unlinkable
    report = (
        f"print('compiled', {CACHE_MISSES}, 'set up', bool(refreshes))\n"
        "import sys; print('array routines imported', 'numba.np.arrayobj' in sys.modules)"
    )
    result = run_python(COUNTED_REFRESHES + patch + SMOKE + DISPATCHERS + report)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == answer.split()
    assert lines[1] == f"compiled 0 set up {not linkable}"
    assert lines[2] == f"array routines imported {not linkable}"


NRT_COMPILES = """
from numba.core import codegen
nrt_compiles = []
finalize = codegen.CPUCodeLibrary.finalize
def counted(library):
    if library.name == "nrt":
        nrt_compiles.append(library)
    finalize(library)
codegen.CPUCodeLibrary.finalize = counted
"""
"""Script lines that count the compilations of Numba's runtime (``nrt_compiles``)."""


@pytest.mark.skipif(not _jit.JIT["cache"], reason="no writable Numba cache here")
def test_numba_compiles_after_cached_code_loaded_without_its_modules():
    """A process after one that loaded the kernels from the cache finds
    Numba's runtime there too (``_nrt_cached_in``) and compiles none.  After
    kernels whose Numba routines were loaded without their module (above),
    Numba still compiles a function of its own using those routines and the
    runtime (a new array), and the loaded kernels still compute the same,
    before and after, in the same process."""
    answer = _smoke_answer()
    first = run_python(SMOKE)  # leaves the runtime's file, if it was not there
    assert first.returncode == 0, first.stderr
    compile_one = (
        "import numba\n"
        "@numba.njit\n"
        "def grid(n):\n"
        "    return np.empty_like(np.arange(n * 2.0)).reshape(n, 2).shape\n"
        "print(grid(3))\n"
    )
    report = "print('runtime compiled', len(nrt_compiles))"
    result = run_python(NRT_COMPILES + SMOKE + compile_one + SMOKE + report)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [answer, "(3, 2)", answer, "runtime compiled 0"]


def test_runtime_file_is_used_only_whole_and_under_its_key(tmp_path):
    """The runtime's saved library comes back as saved, under its key only;
    a file damaged, cut short or of another format counts as none (the
    runtime is then compiled as Numba does); where it cannot be written,
    saving leaves nothing behind (root writes into read-only directories,
    so a file stands where a directory should, and a directory where the
    file should)."""
    path = tmp_path / "nrt-0123.nbc"
    serialized = ("nrt", "object", (b"\x7fELF machine code", b"BC bitcode"))
    assert _jit._nrt_file(path, "key") is None
    _jit._save_nrt_file(path, "key", serialized)
    assert _jit._nrt_file(path, "key") == serialized
    assert _jit._nrt_file(path, "another key") is None
    numbas = tmp_path / "as numba writes"
    numbas.write_bytes(b"")
    assert path.stat().st_mode & 0o777 == numbas.stat().st_mode & 0o777  # others may read it
    assert sorted(p.name for p in tmp_path.iterdir()) == [numbas.name, path.name]  # no temporary
    whole = path.read_bytes()
    flipped = whole.replace(b"machine", b"mashine")
    assert flipped != whole
    for damaged in (b"garbage", whole[: len(whole) // 2], flipped, pickle.dumps(serialized)):
        path.write_bytes(damaged)
        assert _jit._nrt_file(path, "key") is None
    unwritable = tmp_path / "unwritable"
    unwritable.mkdir()
    (unwritable / "a file").write_bytes(b"")
    (unwritable / "a directory").mkdir()
    before = sorted(unwritable.rglob("*"))
    _jit._save_nrt_file(unwritable / "a file" / "nrt-0123.nbc", "key", serialized)
    _jit._save_nrt_file(unwritable / "a directory", "key", serialized)  # not replaceable
    assert sorted(unwritable.rglob("*")) == before


def _object_code(callee: str) -> bytes:
    """Machine code of a function that calls ``callee``, as an object file."""
    import llvmlite.binding as llvm

    module = llvm.parse_assembly(
        f"declare i64 @{callee}(i64)\n"
        "define i64 @caller(i64 %x) {\n"
        f"  %y = call i64 @{callee}(i64 %x)\n"
        "  ret i64 %y\n"
        "}\n"
    )
    return llvm.Target.from_default_triple().create_target_machine().emit_object(module)


def test_cached_code_calling_an_unknown_symbol_sets_numba_up_first():
    """Cached code is linked without Numba's set-up only where every symbol it
    calls is known to the linker (an unknown one aborts the process when the
    code is linked); otherwise, and for whatever cannot be read, the set-up
    runs first."""
    known, unknown = _object_code("PyErr_Clear"), _object_code("positional_embeddings_nowhere")
    if _jit._undefined_symbols(known) is None:
        pytest.skip("object files here are not ELF")
    assert _jit._undefined_symbols(known) == {"PyErr_Clear"}
    assert _jit._undefined_symbols(unknown) == {"positional_embeddings_nowhere"}

    def entry(code: bytes, kind: str = "object") -> tuple[object, ...]:
        return (("caller", kind, (code, b"")), "the rest of a compile result")

    assert _jit._links_without_set_up(entry(known))
    for unusable in (entry(unknown), entry(known, "bitcode"), entry(known[:100]), entry(b"")):
        assert not _jit._links_without_set_up(unusable)
    assert not _jit._links_without_set_up(("a format of another Numba",))


def test_no_writable_cache_location_compiles_in_memory():
    """Where Numba finds no writable cache location it refuses to compile any
    ``cache=True`` function; the package notices and compiles in memory."""
    result = run_python(
        textwrap.dedent(
            """
        import numba
        import numba.core.caching as caching
        import numba.core.dispatcher as dispatcher

        class NoLocator(caching.FunctionCache):
            def __init__(self, py_func):
                raise RuntimeError("cannot cache function: no locator available")

        caching.FunctionCache = dispatcher.FunctionCache = NoLocator

        try:
            numba.njit(cache=True)(lambda: 1)
        except RuntimeError:
            print("plain numba refuses")
        from positional_embeddings._jit import JIT
        print("cache", JIT["cache"])
        """
        )
        + SMOKE
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["plain numba refuses", "cache False"]
    assert lines[2].split() == _smoke_answer().split()


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run as another user",
)
def test_read_only_install_without_writable_cache():
    """As an unprivileged user, with the package read-only and no writable cache."""
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    alone = subprocess.run(
        [*nobody, sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=60, cwd="/"
    )
    if alone.returncode != 0:  # such as an interpreter whose library is in root's home
        pytest.skip(f"this Python does not start as an unprivileged user: {alone.stderr.strip()}")
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        site = copy_package(Path(scratch) / "site")
        tree = [Path(scratch), site, *site.rglob("*")]
        for path in tree:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            result = subprocess.run(
                [*nobody, sys.executable, "-c", SMOKE],
                env={
                    **os.environ,
                    "PYTHONPATH": str(site),
                    "HOME": "/nonexistent",
                    "NUMBA_CACHE_DIR": "/proc/none",
                },
                capture_output=True,
                text=True,
                timeout=300,
                cwd="/",
            )
        finally:
            for path in tree:
                path.chmod(0o755 if path.is_dir() else 0o644)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == _smoke_answer().split()
    assert "Error" not in result.stderr and "Warning" not in result.stderr


# --- CPUs ----------------------------------------------------------------------------

FLOAT16 = """
import hashlib
import numpy as np
from positional_embeddings import AbsolutePE, RoPE, _binary16
rng = np.random.default_rng(5)
x = rng.standard_normal((32, 50, 6)) * np.exp2(rng.integers(-30, 14, (32, 50, 6)))
x = x.astype(np.float16)
x.flat[:4] = [np.nan, -np.inf, np.float16(6e-8), -0.0]
rope = RoPE(32, 64, T=np.float16, scale=3.5)
in_place = x.copy()
rope(in_place, out=in_place)
steps = [rope(x[:, :1], offset=offset) for offset in (7, 8, 63)]  # the later ones remembered
results = [rope.cos_cached, rope.sin_cached, rope(x), rope(np.ascontiguousarray(x)),
           rope(x.astype(np.float32)), RoPE(32, 64)(x), AbsolutePE(32, 64)(x.transpose(1, 0, 2)),
           in_place, *steps]
print(_binary16.native_binary16())
for result in results:
    print(result.dtype, hashlib.sha256(result.tobytes()).hexdigest())
"""
"""A script: float16 tables and float16 inputs (NaN, Inf, a subnormal, -0)
through every float16 path (allocating, in place, remembered decoding
steps), a hash of each result."""


@pytest.fixture(scope="module")
def float16_on_the_host(tmp_path_factory):
    """``FLOAT16``'s output on the host's CPU, run once for the module."""
    run = run_python(FLOAT16, {"NUMBA_CACHE_DIR": str(tmp_path_factory.mktemp("host"))})
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


@pytest.mark.parametrize(
    "target",
    [
        {"NUMBA_CPU_NAME": "generic"},
        {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "+f16c,-avx"},
    ],
    ids=["generic", "f16c turned off by -avx"],
)
def test_float16_without_f16c_gives_the_same_bits(tmp_path, target, float16_on_the_host):
    """Where Numba compiles for a CPU without F16C (its portable ``generic``
    target; one whose features name F16C but turn it off, as ``-avx`` does
    in LLVM), the float16 conversions are integer code, not LLVM's ``half``
    conversions (a call of a library function Numba cannot link, which
    aborted the process), and every result is the same bits as the host's."""
    other = run_python(FLOAT16, {"NUMBA_CACHE_DIR": str(tmp_path / "other"), **target})
    assert other.returncode == 0, other.stderr
    assert other.stdout.split()[0] == "False"
    assert other.stdout.split()[1:] == float16_on_the_host[1:]


# --- import --------------------------------------------------------------------------


def test_import_compiles_nothing_and_opens_no_socket():
    refuse_the_network = """
        import socket

        def refuse(*args, **kwargs):
            raise RuntimeError("network access during import")

        socket.socket = refuse
        socket.create_connection = refuse
        import positional_embeddings
        """
    result = run_python(
        textwrap.dedent(refuse_the_network)
        + DISPATCHERS
        + "print([name for name, dispatcher in dispatchers.items() if dispatcher.signatures])"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- memory --------------------------------------------------------------------------


def test_memory_is_flat_over_100k_calls():
    result = run_python(
        """
        import numpy as np
        from positional_embeddings import RoPE, AbsolutePE

        def rss_kib():
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])

        rope, pe = RoPE(64, 16), AbsolutePE(16, 16)
        x, out = np.ones((64, 4, 2), np.float32), np.empty((64, 4, 2), np.float32)
        z = np.ones((4, 16, 2), np.float32)
        for _ in range(2000):
            rope(x); rope(x, out=out); pe(z); rope(x, offset=3)
        start = rss_kib()
        for _ in range(25000):
            rope(x); rope(x, out=out); pe(z); rope(x, offset=3)
        print(rss_kib() - start)
        """
    )
    assert result.returncode == 0, result.stderr
    growth_kib = int(result.stdout.strip())
    assert growth_kib < 5 * 1024, f"resident memory grew by {growth_kib} KiB"


RUNTIME_RECORDS = """
import numpy as np
from numba.core.runtime import rtsys
from positional_embeddings import AbsolutePE, LearnedPE, RelativePE, RoPE, alibi_bias

rope, rope16, pe = RoPE(64, 32), RoPE(64, 32, T=np.float16), AbsolutePE(16, 32)
learned, relative = LearnedPE(32, 16, seed=0), RelativePE(4, 8, seed=0)
x = np.random.default_rng(0).standard_normal((64, 4, 3)).astype(np.float32)
cache = np.zeros((64, 32, 3), np.float32)
z = np.ones((4, 16, 3), np.float32)


def in_place(layer, a):
    return layer(a, out=a)


calls = {
    "RoPE, C order": lambda: rope(x),
    "RoPE, F order": lambda: rope(np.asfortranarray(x)),
    "RoPE, out=": lambda: rope(x, out=np.empty_like(x)),
    "RoPE, in place": lambda: in_place(rope, x.copy()),
    "RoPE float16, in place": lambda: in_place(rope16, x.astype(np.float16)),
    "RoPE, a step into a cache slot": lambda: rope(x[:, :1], out=cache[:, 5:6], offset=5),
    "RoPE, position ids": lambda: rope(x, positions=np.array([5, 1, 7, 2])),
    "RoPE, backward": lambda: rope.backward(x),
    "AbsolutePE, C order": lambda: pe(z),
    "LearnedPE, batch first": lambda: learned(z.transpose(2, 0, 1).copy(), batch_first=True),
    "RelativePE": lambda: relative(5, 6),
    "alibi_bias": lambda: alibi_bias(4, 8),
}
for name, call in calls.items():
    call()
    call()
    before = rtsys.get_allocation_stats()
    for _ in range(5):
        call()
    after = rtsys.get_allocation_stats()
    print(f"{name}: {after.mi_alloc - before.mi_alloc} {after.mi_free - before.mi_free}")
"""


def test_compiled_calls_take_their_arrays_without_numbas_runtime():
    """The loops that Python calls, and that allocate nothing, are compiled
    without Numba's runtime (``_jit.JIT_LOOP``): no call wraps its arrays in
    the runtime's records (an allocation and a release per array, as Numba's
    runtime statistics count them), the decoding step included.  (Not the
    loop of AbsolutePE's short sequences in Julia's order, whose scratch
    plane is allocated in the loop, nor the additive encodings' loop of ids
    per batch column with the batch innermost, whose buffer is.)"""
    result = run_python(RUNTIME_RECORDS, env={"NUMBA_NRT_STATS": "1"})
    assert result.returncode == 0, result.stderr
    counts = dict(line.rsplit(": ", 1) for line in result.stdout.splitlines())
    assert len(counts) == 12, result.stdout
    wrapped = {name: count for name, count in counts.items() if count != "0 0"}
    assert not wrapped, f"records (allocated, released) over 5 calls: {wrapped}"


def test_without_numbas_runtime_option_every_function_keeps_the_runtime(monkeypatch):
    import numba.core.cpu

    assert _jit._runtime(False) == {"_nrt": False}
    monkeypatch.setattr(numba.core.cpu, "CPUTargetOptions", type("Options", (), {}))
    assert _jit._runtime(False) == {}


# --- numpy versions ------------------------------------------------------------------


def _layouts() -> list[np.ndarray]:
    """Arrays of 4 dims laid out in many ways: both orders, axes exchanged,
    cut with steps and reversed, axes of length 1 and 0."""
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32)
    arrays = [base.reshape(2, 3, 4, 5), base.reshape(2, 3, 4, 5, order="F")]
    arrays += [a.transpose(axes) for a in arrays[:2] for axes in ((0, 1, 3, 2), (3, 2, 1, 0))]
    arrays += [a[:, :, ::2] for a in arrays[:4]] + [a[..., ::-1] for a in arrays[:4]]
    arrays += [np.zeros((3, 1, 4, 1), order=order) for order in "CF"]
    arrays += [np.zeros((3, 2, 0, 4)), np.zeros((4, 1, 1, 5))[:, :, :, 1:4]]
    return arrays


# That spelling sets the shape of a view, which numpy 2.5 deprecates (the
# package only uses it before 2.1).
@pytest.mark.filterwarnings("ignore:Setting the shape on a NumPy array:DeprecationWarning")
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("layout", range(len(_layouts())))
def test_no_copy_reshape_of_numpy_before_2_1_views_as_numpy_does(layout, order):
    """The views the kernels take by merging axes come, on numpy before 2.1
    (no ``copy`` keyword), from setting the shape of a view: where numpy's
    reshape gives a view, it gives the same one; where numpy copies, it
    refuses (and ``viewed`` gives None)."""
    a = _layouts()[layout]
    for shape in ((*a.shape[:2], -1), (a.shape[0] * a.shape[1], *a.shape[2:])):
        reshaped = a.reshape(shape, order=order)
        is_view = a.size == 0 or np.shares_memory(reshaped, a)
        if not is_view:
            with pytest.raises(AttributeError, match="Incompatible shape"):
                _views.reshaped_in_place(a, shape, order)
            assert _views.viewed(a, shape, order) is None
            continue
        for view in (_views.reshaped_in_place(a, shape, order), _views.viewed(a, shape, order)):
            assert view is not None
            assert view.shape == reshaped.shape
            assert view.__array_interface__["data"] == reshaped.__array_interface__["data"]
            assert all(
                n <= 1 or p == q
                for n, p, q in zip(view.shape, view.strides, reshaped.strides, strict=True)
            )
            np.testing.assert_array_equal(view, reshaped)


def test_numba_without_its_compiler_is_refused_at_import():
    """``NUMBA_DISABLE_JIT=1`` leaves the loops' intrinsics with no
    pure-Python form: the import says so, where every constructor failed
    deep inside Numba."""
    result = run_python("import positional_embeddings", env={"NUMBA_DISABLE_JIT": "1"})
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "ImportError: positional_embeddings needs Numba's compiler, which NUMBA_DISABLE_JIT=1 "
        "turns off (its loops have no pure-Python form); unset NUMBA_DISABLE_JIT"
    )
