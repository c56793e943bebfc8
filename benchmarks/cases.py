"""The benchmark cases: each measures its contenders and returns one row of the table."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numba
import numpy as np

from positional_embeddings import AbsolutePE, RoPE, _parallel

from .contenders import (
    absolute_table_numpy,
    pe_numpy,
    pe_torch,
    rope_numpy,
    rope_tables_numpy,
    rope_torch,
)
from .timing import interleaved_medians

__all__ = ["GROUPS", "OTHER_ORDER", "SUCCESSIVE_SLOTS", "Case", "Row", "Settings", "all_cases"]

ROOT = Path(__file__).resolve().parents[1]

GROUPS = (
    "rope",
    "rope-out",
    "rope-inplace",
    "rope-in-cache",
    "threads",
    "decode",
    "pe",
    "pe-out",
    "layouts",
    "positions",
    "tables",
    "cold-start",
)
"""Names for ``--cases``, in the order the table lists them."""

SUCCESSIVE_SLOTS = "successive slots"
"""What the case names of the decoding steps into successive slots of a
cache say (``cache_slot``); the targets leave those rows out."""

OTHER_ORDER = "x in the other order"
"""What the case names of the decoding steps laid out across their cache
say (``cache_slot``); the targets leave those rows out."""

COLD_START_CODE = (
    "import numpy as np; from positional_embeddings import RoPE; "
    "RoPE(64, 128)(np.ones((64, 128, 8), np.float32))"
)
"""What a fresh interpreter runs for the cold start (import, tables, one call)."""

IMPORT_FLOOR_CODE = "import numpy, numba"
"""The cold start's floor: a fresh interpreter importing the dependencies only."""


@dataclass
class Row:
    """One line of the table: the package's median time and its contenders'.

    Attributes
    ----------
    group : str
        The ``--cases`` name that produced it.
    case : str
        What was called, e.g. ``rope(x, out=out)``.
    shape : tuple of int
        Shape of the input (of the table, for construction); empty if none.
    order, dtype : str
        Memory order (``C``/``F``) and dtype of the input; empty if none.
        Rows written into a slot of a cache give the cache's order (``x``'s
        too, unless the case says that ``x`` is in the other order).
    seconds : float
        Median seconds per call of the package.
    floor : str
        What the floor is (``x.copy()``, ``np.copyto``, ``import numba``).
    floor_seconds, numpy_seconds, torch_seconds : float or None
        Median seconds of the floor, the numpy formula and torch eager, in
        the same interleaved repetitions; None where not measured.
    bytes_moved : int
        Bytes read plus bytes written by one call (input and output arrays;
        the small tables are not counted); 0 where not meaningful.
    """

    group: str
    case: str
    shape: tuple[int, ...]
    order: str
    dtype: str
    seconds: float
    floor: str = ""
    floor_seconds: float | None = None
    numpy_seconds: float | None = None
    torch_seconds: float | None = None
    bytes_moved: int = 0

    @property
    def gbps(self) -> float | None:
        """Throughput in GB/s (bytes read + written), None where not meaningful."""
        return self.bytes_moved / self.seconds / 1e9 if self.bytes_moved else None

    def _over(self, other: float | None) -> float | None:
        return None if other is None else self.seconds / other

    @property
    def vs_floor(self) -> float | None:
        """The package's time over the floor's (below 1: faster than a copy)."""
        return self._over(self.floor_seconds)

    @property
    def vs_numpy(self) -> float | None:
        """The package's time over the numpy formula's."""
        return self._over(self.numpy_seconds)

    @property
    def vs_torch(self) -> float | None:
        """The package's time over torch eager's; None without torch."""
        return self._over(self.torch_seconds)

    def as_dict(self) -> dict[str, Any]:
        """The fields and the derived throughput and ratios, for JSON."""
        return {
            **asdict(self),
            "shape": list(self.shape),
            "gbps": self.gbps,
            "vs_floor": self.vs_floor,
            "vs_numpy": self.vs_numpy,
            "vs_torch": self.vs_torch,
        }


@dataclass(frozen=True)
class Settings:
    """How a run measures: sizes, repetitions, the length of a timing sample."""

    quick: bool
    repeat: int

    @property
    def sample_seconds(self) -> float:
        """Calls faster than this are timed in batches filling it."""
        return 5e-4 if self.quick else 1e-2


@dataclass(frozen=True)
class Case:
    """A row to measure: its ``--cases`` group and the function measuring it."""

    group: str
    run: Callable[[Settings], Row]


def _array(shape: tuple[int, ...], dtype: Any, order: str) -> np.ndarray:
    x: np.ndarray = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return x.copy(order="F") if order == "F" else x


def _measure(
    group: str,
    case: str,
    x: np.ndarray,
    order: str,
    contenders: dict[str, Callable[[], object] | None],
    floor: str,
    settings: Settings,
) -> Row:
    """Time ``contenders`` (keys ``ours``, ``floor``, ``numpy``, ``torch``;
    None values are skipped) and make the row for input ``x``."""
    present = {name: call for name, call in contenders.items() if call is not None}
    times = interleaved_medians(present, settings.repeat, sample_seconds=settings.sample_seconds)
    return Row(
        group=group,
        case=case,
        shape=x.shape,
        order=order,
        dtype=str(x.dtype),
        seconds=times["ours"],
        floor=floor,
        floor_seconds=times["floor"],
        numpy_seconds=times.get("numpy"),
        torch_seconds=times.get("torch"),
        bytes_moved=2 * x.nbytes,
    )


def rope_call(
    settings: Settings, group: str, shape: tuple[int, ...], dtype: Any, order: str
) -> Row:
    """``rope(x)`` (group ``rope``), ``rope(x, out=out)`` (``rope-out``,
    ``rope-in-cache``) or ``rope(x, out=x)`` (``rope-inplace``)."""
    rope = RoPE(shape[0], shape[1], T=dtype)
    x = _array(shape, dtype, order)
    writes = {"rope": "new", "rope-inplace": "x"}.get(group, "out")
    contenders, floor = _plain_call(rope, x, writes)
    case = f"{'in-cache ' if group == 'rope-in-cache' else ''}{_CALL[writes].format('rope')}"
    contenders |= {"numpy": rope_numpy(rope, x), "torch": rope_torch(rope, x)}
    return _measure(group, case, x, order, contenders, floor, settings)


@contextmanager
def _split_over(threads: int) -> Iterator[None]:
    """Every call split over exactly ``threads`` threads (1: never), whatever its size."""
    saved = _parallel._threads, _parallel.MIN_BYTES_PER_THREAD
    _parallel._threads = threads
    _parallel.MIN_BYTES_PER_THREAD = 1 if threads > 1 else sys.maxsize
    try:
        yield
    finally:
        _parallel._threads, _parallel.MIN_BYTES_PER_THREAD = saved


def thread_split(settings: Settings, shape: tuple[int, ...], threads: int) -> Row:
    """``rope(x, out=out)``, C order, float32, split over ``threads`` threads
    whatever the size: where splitting starts to pay (``MIN_BYTES_PER_THREAD``)."""
    rope = RoPE(shape[0], shape[1])
    x = _array(shape, np.float32, "C")
    out = np.empty_like(x)

    def call() -> None:
        with _split_over(threads):
            rope(x, out=out)

    contenders: dict[str, Callable[[], object] | None] = {
        "floor": partial(np.copyto, out, x),
        "ours": call,
    }
    case = f"rope(x, out=out), {threads} thread" + ("s" if threads > 1 else "")
    return _measure("threads", case, x, "C", contenders, "np.copyto", settings)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _copy_rows(source, target, start, stop, post):  # type: ignore[no-untyped-def]
    """``target[start:stop] = source[start:stop]`` for 2-D C-order arrays:
    a copy split as the package's kernels are.  Each row's columns are
    counted from 0, which lets the loop vectorise (a slice assigned, or a
    flat index from ``start``, took 2-3x ``np.copyto``'s time on one
    thread)."""
    _parallel.posted(post)
    for row in range(start, stop):
        for column in range(source.shape[1]):
            target[row, column] = source[row, column]


def copy_split(settings: Settings, shape: tuple[int, ...]) -> Row:
    """A copy of a C-ordered float32 array, its two halves copied at the
    same time by the calling thread and the package's team thread, handed
    over as the package hands over its kernels' ranges: what splitting a
    memory-bound call over two threads can gain on this machine at all
    (the ceiling of the threaded rows)."""
    x = _array(shape, np.float32, "C")
    out = np.empty_like(x)
    source, target = x.reshape(shape[0], -1), out.reshape(shape[0], -1)

    def split() -> None:
        with _split_over(2):
            _parallel.run_ranges(_copy_rows, shape[0], 2 * x.nbytes, source, target)

    contenders: dict[str, Callable[[], object] | None] = {
        "floor": partial(np.copyto, out, x),
        "ours": split,
    }
    return _measure("threads", "copy, 2 threads", x, "C", contenders, "np.copyto", settings)


_CALL = {"new": "{}(x)", "out": "{}(x, out=out)", "x": "{}(x, out=x)"}
"""How each way of writing the result reads in the table."""


def _plain_call(
    layer: Callable[..., object], x: np.ndarray, writes: str
) -> tuple[dict[str, Callable[[], object] | None], str]:
    """The package's call and its floor, with the floor's name: ``layer(x)``
    against ``x.copy()`` (``writes="new"``), ``layer(x, out=out)`` (``"out"``)
    or ``layer(x, out=x)`` in place (``"x"``, on a copy of ``x``) against
    ``np.copyto``."""
    if writes == "new":
        return {"floor": partial(x.copy, order="K"), "ours": partial(layer, x)}, "x.copy()"
    out = np.empty_like(x) if writes == "out" else x.copy(order="K")
    ours = partial(layer, x, out=out) if writes == "out" else partial(layer, out, out=out)
    return {"floor": partial(np.copyto, out, x), "ours": ours}, "np.copyto"


def decode(settings: Settings, order: str, writes: str) -> Row:
    """One token of decoding, ``(128, 1, 32)`` float32: microseconds per call."""
    rope = RoPE(128, 4096)
    x = _array((128, 1, 32), np.float32, order)
    contenders, floor = _plain_call(rope, x, writes)
    contenders |= {"numpy": rope_numpy(rope, x), "torch": rope_torch(rope, x)}
    return _measure(
        "decode", f"decode {_CALL[writes].format('rope')}", x, order, contenders, floor, settings
    )


_SLOT = 17
"""The position a decoding step is written at in a cache: the rows into one
slot of a cache (``cache_slot``) and ``cached_key``."""


def cache_slot(
    settings: Settings,
    order: str,
    cache: tuple[int, ...],
    successive: bool = False,
    crossed: bool = False,
) -> Row:
    """One token of decoding written where a KV cache in Julia's layout keeps
    it: ``rope(x, offset=p, out=slot)`` on ``(128, 1, 32)`` float32, ``slot``
    the view at position ``p`` of a ``cache`` (``(128, 4096, 32)``) float32
    array of the same order (with ``crossed``, ``x`` in the other order),
    against ``np.copyto`` into it (numpy and torch: their formula,
    allocating).

    ``p`` is ``_SLOT`` at every call, or, with ``successive``, the next
    position at each call, as a decoding loop writes them: the package's
    call and the floor then each write a cache of their own, position after
    position, so that the slot's lines come from memory rather than from
    the caches (the views are made beforehand; a call takes the next,
    through a Python step that both pay, about 0.1 us).  The numpy and
    torch formulas rotate at ``_SLOT`` in either case: the same work at any
    position."""
    rope = RoPE(cache[0], cache[1])
    x = _array(
        (cache[0], 1, cache[2]), np.float32, {"C": "F", "F": "C"}[order] if crossed else order
    )
    if successive:
        ours = _successive_slots(cache, order, lambda p, slot: rope(x, offset=p, out=slot))
        floor = _successive_slots(cache, order, lambda p, slot: np.copyto(slot, x))
    else:
        slot = np.zeros(cache, np.float32, order=order)[:, _SLOT : _SLOT + 1]
        ours, floor = partial(rope, x, offset=_SLOT, out=slot), partial(np.copyto, slot, x)
    contenders: dict[str, Callable[[], object] | None] = {
        "floor": floor,
        "ours": ours,
        "numpy": rope_numpy(rope, x, _SLOT),
        "torch": rope_torch(rope, x, _SLOT),
    }
    slots = SUCCESSIVE_SLOTS if successive else "slot"
    step = f"{OTHER_ORDER}, " if crossed else ""
    case = f"decode rope(x, out=slot), {step}{slots} of a (head, seq, batch) cache"
    return _measure("decode", case, x, order, contenders, "np.copyto", settings)


def _successive_slots(
    cache: tuple[int, ...], order: str, write: Callable[[int, np.ndarray], object]
) -> Callable[[], None]:
    """A call of ``write(p, slot)`` with the next position ``p`` and its slot
    of a new ``cache`` array (written once beforehand, as a cache in use is)."""
    kv = np.ones(cache, np.float32, order=order)
    steps = itertools.cycle([(p, kv[:, p : p + 1]) for p in range(cache[1])])

    def step() -> None:
        write(*next(steps))

    return step


def stored_queries(settings: Settings, seq: int) -> Row:
    """Hugging Face's queries as they arrive, (batch, seq, heads, head_dim) =
    ``(4, seq, 8, 128)`` float32, reversed to Julia's axes: a 4-D view
    ``(128, seq, 8, 4)``.  One token of decoding (``seq`` 1: numpy and torch
    take its 3-D view, which broadcasts their tables as for the other
    decoding rows), or a chunk of positions (speculative decoding, a prefill
    in chunks: their tables broadcast over both batch axes)."""
    rope = RoPE(128, 4096)
    x = _array((4, seq, 8, 128), np.float32, "C").transpose(3, 1, 2, 0)
    formula_x = x.reshape(128, 1, -1, order="F") if seq == 1 else x
    contenders, floor = _plain_call(rope, x, "new")
    contenders |= {"numpy": rope_numpy(rope, formula_x), "torch": rope_torch(rope, formula_x)}
    step = "decode" if seq == 1 else "chunk"
    case = f"{step} rope(x), x stored (batch, seq, heads, head)"
    return _measure("decode", case, x, "", contenders, floor, settings)


def cached_key(settings: Settings, cache: tuple[int, ...]) -> Row:
    """One token of decoding where Hugging Face's cache holds it: the key at
    position ``_SLOT`` of a (batch, seq, heads, head_dim) float32 cache ``cache``
    (``(4, 4096, 8, 128)``) reversed to Julia's axes, a ``(128, 1, 8, 4)``
    view whose heads and batch axes do not merge, rotated there in place
    against ``np.copyto`` into it (numpy and torch: their formula on it)."""
    rope = RoPE(cache[-1], cache[1])
    key = _array(cache, np.float32, "C")[:, _SLOT : _SLOT + 1].transpose(3, 1, 2, 0)
    contenders: dict[str, Callable[[], object] | None] = {
        "floor": partial(np.copyto, key, key.copy(order="K")),
        "ours": partial(rope, key, offset=_SLOT, out=key),
        "numpy": rope_numpy(rope, key, _SLOT),
        "torch": rope_torch(rope, key, _SLOT),
    }
    case = "decode rope(k, out=k), k in a (batch, seq, heads, head) cache"
    return _measure("decode", case, key, "", contenders, "np.copyto", settings)


_PADDED_STEP = 100
"""The position of the longest sequence at the left-padded decoding step."""


def pe_decode(
    settings: Settings,
    order: str,
    batch_first: bool = False,
    seq: int = 1,
    padded: bool = False,
) -> Row:
    """AbsolutePE's decoding step at position 0: ``pe(x)`` on ``(1, 512, 32)``
    float32 (the Julia docs' features and batch), or ``pe(x,
    batch_first=True)`` on ``(32, 1, 512)`` (numpy and torch add the table
    to its (seq, features, batch) view): microseconds per call.  With
    ``seq``, a chunk of that many positions (a prefill in chunks).  With
    ``padded``, the step of a left-padded batch at ``_PADDED_STEP``: ``pe(x,
    positions=ids)``, each sequence at its own position (``left_padded``;
    GPT-2's ``position_ids``), numpy and torch gathering the table's rows
    at the ids."""
    pe = _absolute_pe(512, seq)
    x = _array((32, seq, 512) if batch_first else (seq, 512, 32), np.float32, order)
    layer = partial(pe, batch_first=True) if batch_first else pe
    julia_axes = x.transpose(1, 2, 0) if batch_first else x
    ids = left_padded(_PADDED_STEP + seq, 32)[-seq:] if padded else None
    if ids is not None:
        layer = partial(layer, positions=ids.T if batch_first else ids)
    contenders, floor = _plain_call(layer, x, "new")
    contenders |= {"numpy": pe_numpy(pe, julia_axes, ids), "torch": pe_torch(pe, julia_axes, ids)}
    step = "decode" if seq == 1 else "chunk"
    case = f"{step} pe(x, batch_first=True)" if batch_first else f"{step} pe(x)"
    if padded:
        case = case.replace("(x", "(x, positions=ids") + ", ids of a left-padded batch"
    return _measure("decode", case, x, order, contenders, floor, settings)


def _absolute_pe(features: int, seq: int) -> AbsolutePE:
    """The AbsolutePE a model would hold: the Julia docs' 1000 positions, or
    ``seq`` if longer (a table only as long as ``x`` would hide the cost of
    reading it across positions)."""
    return AbsolutePE(features, max(seq, 1000))


def pe_call(
    settings: Settings, shape: tuple[int, ...], dtype: Any, order: str, with_out: bool
) -> Row:
    """``pe(x)`` (group ``pe``) or ``pe(x, out=out)`` (``pe-out``) on ``x``
    of ``dtype`` (float32 or float64; the table is float32 either way)."""
    pe = _absolute_pe(shape[1], shape[0])
    x = _array(shape, dtype, order)
    contenders, floor = _plain_call(pe, x, "out" if with_out else "new")
    contenders |= {"numpy": pe_numpy(pe, x), "torch": pe_torch(pe, x)}
    group, case = ("pe-out", "pe(x, out=out)") if with_out else ("pe", "pe(x)")
    return _measure(group, case, x, order, contenders, floor, settings)


def other_layout(settings: Settings, kind: str, shape: tuple[int, ...]) -> Row:
    """C-order float32 layouts whose innermost axis is not one along which
    most loops vectorise: along table positions, ``pe(x, batch_first=True)``
    on (batch, seq, features) and ``rope(x)`` on (head, seq, 1); a batch of
    a few columns (rows too short to vectorise, which the loops unroll),
    ``rope(x)`` on (head, seq, batch), a long sequence and a chunk of a few
    positions, and ``pe(x)`` on (seq, features, batch)."""
    x = _array(shape, np.float32, "C")
    batch = "one batch column" if shape[2] == 1 else f"a batch of {shape[2]}"
    layer: Callable[..., object]
    if kind == "pe":
        layer = partial(_absolute_pe(shape[2], shape[1]), batch_first=True)
        case = "pe(x, batch_first=True)"
    elif kind == "pe-short":
        layer, case = _absolute_pe(shape[1], shape[0]), f"pe(x), {batch}"
    else:
        layer, case = RoPE(shape[0], shape[1]), f"rope(x), {batch}"
    contenders, floor = _plain_call(layer, x, "new")
    return _measure("layouts", case, x, "C", contenders, floor, settings)


def pe_across(settings: Settings, shape: tuple[int, ...]) -> Row:
    """``pe(x, out=out)`` float32 from a C-order ``x`` into an F-order
    ``out``: the sequence innermost in ``out``, not in ``x`` (a prompt's
    embeddings written where a Julia-order array keeps them), against
    ``np.copyto`` across the same two orders."""
    pe = _absolute_pe(shape[1], shape[0])
    x = _array(shape, np.float32, "C")
    out = np.empty(shape, np.float32, order="F")
    contenders: dict[str, Callable[[], object] | None] = {
        "floor": partial(np.copyto, out, x),
        "ours": partial(pe, x, out=out),
        "numpy": pe_numpy(pe, x),
        "torch": pe_torch(pe, x),
    }
    case = "pe(x, out=out), out in the other order"
    return _measure("layouts", case, x, "C", contenders, "np.copyto", settings)


def stored_layout(
    settings: Settings, kind: str, shape: tuple[int, ...], stored: tuple[int, ...]
) -> Row:
    """``rope(x)`` or ``pe(x)``, float32, on ``x`` of ``shape`` (Julia's axes)
    that is a view of a C-order array holding its axes in the order
    ``stored``: RoPE's (seq, heads, head) (Hugging Face's queries before
    their transpose), AbsolutePE's (seq, batch, features) (PyTorch's
    sequence-first layout)."""
    x = _array(tuple(shape[axis] for axis in stored), np.float32, "C")
    x = x.transpose(np.argsort(stored))
    layer: Any
    if kind == "pe":
        layer, names = _absolute_pe(shape[1], shape[0]), ("seq", "features", "batch")
        formulas: tuple[Callable[..., Any], ...] = (pe_numpy, pe_torch)
    else:
        layer, names = RoPE(shape[0], shape[1]), ("head", "seq", "heads")
        formulas = (rope_numpy, rope_torch)
    contenders, floor = _plain_call(layer, x, "new")
    contenders |= {"numpy": formulas[0](layer, x), "torch": formulas[1](layer, x)}
    case = f"{kind}(x), x stored ({', '.join(names[axis] for axis in stored)})"
    return _measure("layouts", case, x, "", contenders, floor, settings)


def left_padded(seq: int, batch: int) -> np.ndarray:
    """Position ids of a left-padded batch, shape (seq, batch): column ``b``
    starts after ``b * seq // (2 * batch)`` pad positions, which read
    position 0 as its real first one does (padded prompts of up to half
    the length)."""
    pads = np.arange(batch) * seq // (2 * batch)
    return np.maximum(np.arange(seq)[:, np.newaxis] - pads, 0)


def position_ids(settings: Settings, kind: str, shape: tuple[int, ...], order: str) -> Row:
    """``rope(x, positions=ids)`` or ``pe(x, positions=ids)`` on float32 ``x``
    of ``shape`` with one id per position and batch column
    (``left_padded``), against ``x.copy()`` and the formulas gathering the
    tables at the ids."""
    x = _array(shape, np.float32, order)
    ids = left_padded(shape[1], shape[2]) if kind == "rope" else left_padded(*shape[::2])
    layer: Any
    if kind == "pe":
        layer = _absolute_pe(shape[1], shape[0])
        formulas = {"numpy": pe_numpy(layer, x, ids), "torch": pe_torch(layer, x, ids)}
    else:
        layer = RoPE(shape[0], shape[1])
        formulas = {"numpy": rope_numpy(layer, x, 0, ids), "torch": rope_torch(layer, x, 0, ids)}
    contenders: dict[str, Callable[[], object] | None] = {
        "floor": partial(x.copy, order="K"),
        "ours": partial(layer, x, positions=ids),
        **formulas,
    }
    case = f"{kind}(x, positions=ids), ids left-padded per column"
    return _measure("positions", case, x, order, contenders, "x.copy()", settings)


def table_construction(
    settings: Settings, kind: str, size: int, length: int, dtype: Any = np.float32
) -> Row:
    """``RoPE(size, length, T=dtype)`` or ``AbsolutePE(size, length)`` (float32)
    against numpy's tables."""
    build: Callable[[], object]
    formula: Callable[[], object]
    if kind == "RoPE":
        build = partial(RoPE, size, length, T=dtype)
        formula = partial(rope_tables_numpy, size, length, dtype=dtype)
    else:
        build = partial(AbsolutePE, size, length)
        formula = partial(absolute_table_numpy, size, length)
    times = interleaved_medians({"ours": build, "numpy": formula}, settings.repeat)
    return Row(
        group="tables",
        case=f"{kind}({size}, {length})",
        shape=(size, length),
        order="",
        dtype=np.dtype(dtype).name,
        seconds=times["ours"],
        numpy_seconds=times["numpy"],
    )


def _python(code: str, environment: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", code], env=environment, check=True, stdout=subprocess.DEVNULL
    )


def _with_empty_cache(code: str, environment: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        _python(code, {**environment, "NUMBA_CACHE_DIR": cache})


def cold_start(settings: Settings, warm: bool) -> Row:
    """A fresh interpreter: import, ``RoPE(64, 128)``, one call, timed end to end.

    Warm: Numba's cache where this environment keeps it, filled by an
    untimed first run.  Empty: a new ``NUMBA_CACHE_DIR`` for every run, so
    everything compiles.  The floor is a fresh interpreter importing numpy
    and numba only.  Python keeps its bytecode cache in both, as it does for
    an installed package (pip writes the ``.pyc`` files at install): without
    it (``PYTHONDONTWRITEBYTECODE``, set on some machines) every module of
    the package is compiled from source at each start, ~65 ms here.
    """
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    ours = partial(_python if warm else _with_empty_cache, COLD_START_CODE, environment)
    times = interleaved_medians(
        {"ours": ours, "floor": partial(_python, IMPORT_FLOOR_CODE, environment)},
        min(settings.repeat, 5) if warm else 1,
        warmup=warm,
    )
    return Row(
        group="cold-start",
        case="cold start, " + ("warm cache" if warm else "empty cache"),
        shape=(),
        order="",
        dtype="",
        seconds=times["ours"],
        floor="import numba",
        floor_seconds=times["floor"],
    )


def all_cases(quick: bool) -> list[Case]:
    """Every row of the table, in order; ``quick`` shrinks every size for a smoke run.

    The full sizes: LLaMA-like ``(128, 4096, 32)`` (float32, and float16
    with float16 tables) and ``(64, 2048, 256)``, the Julia docs' ``(64,
    100, 256)``, a large ``(128, 2048, 128)`` (128 MB
    in float32, 256 MB in float64), an in-cache ``(128, 512, 32)``, the
    decoding step ``(128, 1, 32)`` (and as a 4-D view ``(128, 1, 8, 4)``, with
    a chunk of 8 positions ``(128, 8, 8, 4)`` in the same layout, and a
    key rotated in place in a ``(4, 4096, 8, 128)`` cache), a
    call split over one and over two threads at 4, 8, 16 and 64 MB
    ``(128, n, 32)`` with a copy split over two threads beside it, AbsolutePE on the
    Julia docs' ``(100, 512, 32)``, on ``(4096, 512, 16)`` and its decoding
    step ``(1, 512, 32)`` (and batch-first, ``(32, 1, 512)``; ``(4096, 512,
    16)`` also in float64, 256 MB), AbsolutePE
    batch-first ``(32, 256, 512)`` and RoPE on one batch column ``(128,
    4096, 1)``, RoPE ``(128, 4096, 32)`` stored as (seq, heads, head) and
    AbsolutePE ``(4096, 512, 16)`` stored as (seq, batch, features), both
    with left-padded position ids per batch column (RoPE on ``(128, 2048,
    32)``), the tables of ``RoPE(128, 131072)``, ``RoPE(128, 65504, T=float16)`` (the
    longest float16 positions) and ``AbsolutePE(512, 8192)``.  Without
    ``quick``, the cold start also runs with an empty cache (compiling
    everything).
    """

    def size(full: tuple[int, ...], small: tuple[int, ...]) -> tuple[int, ...]:
        return small if quick else full

    large = size((128, 2048, 128), (128, 32, 8))
    rope_rows: list[tuple[str, tuple[int, ...], Any]] = [
        ("rope", size((128, 4096, 32), (128, 64, 4)), np.float32),
        ("rope", size((128, 4096, 32), (128, 64, 4)), np.float16),
        ("rope", size((64, 2048, 256), (64, 32, 16)), np.float32),
        ("rope", size((64, 100, 256), (64, 10, 16)), np.float32),
        ("rope", large, np.float32),
        ("rope", large, np.float64),
        ("rope-out", large, np.float32),
        ("rope-inplace", large, np.float32),
        ("rope-in-cache", size((128, 512, 32), (128, 16, 4)), np.float32),
        ("rope-inplace", size((128, 512, 32), (128, 16, 4)), np.float32),
    ]
    cases = [
        Case(group, partial(rope_call, group=group, shape=shape, dtype=dtype, order=order))
        for group, shape, dtype in rope_rows
        for order in "CF"
    ]
    for length in (8, 16) if quick else (256, 512, 1024, 4096):
        cases += [
            Case("threads", partial(thread_split, shape=(128, length, 32), threads=threads))
            for threads in (1, 2)
        ]
        cases.append(Case("threads", partial(copy_split, shape=(128, length, 32))))
    cases += [
        Case("decode", partial(decode, order=order, writes=writes))
        for writes in ("new", "out", "x")
        for order in "CF"
    ]
    cache = size((128, 4096, 32), (128, 32, 32))
    cases += [
        Case("decode", partial(cache_slot, order=order, cache=cache, **kind))
        for kind in ({}, {"successive": True}, {"crossed": True})
        for order in "CF"
    ]
    cases += [Case("decode", partial(stored_queries, seq=seq)) for seq in (1, 8)]
    cases.append(
        Case("decode", partial(cached_key, cache=size((4, 4096, 8, 128), (2, 32, 8, 128))))
    )
    cases += [Case("decode", partial(pe_decode, order=order)) for order in "CF"]
    cases.append(Case("decode", partial(pe_decode, order="C", batch_first=True)))
    cases += [Case("decode", partial(pe_decode, order=order, seq=8)) for order in "CF"]
    cases += [Case("decode", partial(pe_decode, order=order, padded=True)) for order in "CF"]
    absolute = size((4096, 512, 16), (64, 512, 2))
    pe_rows: list[tuple[str, tuple[int, ...], Any]] = [
        ("pe", size((100, 512, 32), (10, 512, 4)), np.float32),
        ("pe", absolute, np.float32),
        ("pe", absolute, np.float64),
        ("pe-out", absolute, np.float32),
    ]
    cases += [
        Case(
            group,
            partial(pe_call, shape=shape, dtype=dtype, order=order, with_out=group == "pe-out"),
        )
        for group, shape, dtype in pe_rows
        for order in "CF"
    ]
    layout_rows = [
        ("pe", size((32, 256, 512), (2, 20, 16))),
        ("rope", size((128, 4096, 1), (16, 70, 1))),
        ("rope", size((128, 4096, 4), (16, 70, 4))),
        ("rope", size((128, 8, 4), (16, 8, 4))),
        ("pe-short", size((4096, 512, 4), (64, 16, 4))),
    ]
    cases += [
        Case("layouts", partial(other_layout, kind=kind, shape=shape))
        for kind, shape in layout_rows
    ]
    cases.append(Case("layouts", partial(pe_across, shape=size((8, 512, 32), (8, 16, 4)))))
    stored_rows = [
        ("rope", size((128, 4096, 32), (128, 64, 4)), (1, 2, 0)),
        ("pe", absolute, (0, 2, 1)),
    ]
    cases += [
        Case("layouts", partial(stored_layout, kind=kind, shape=shape, stored=stored))
        for kind, shape, stored in stored_rows
    ]
    position_rows = [
        ("rope", size((128, 2048, 32), (128, 64, 4))),
        ("pe", size((4096, 512, 16), (64, 512, 2))),
    ]
    cases += [
        Case("positions", partial(position_ids, kind=kind, shape=shape, order=order))
        for kind, shape in position_rows
        for order in "CF"
    ]
    rope_length, absolute_length = (1024, 64) if quick else (131_072, 8192)
    cases.append(
        Case("tables", partial(table_construction, kind="RoPE", size=128, length=rope_length))
    )
    cases.append(
        Case(
            "tables",
            partial(
                table_construction,
                kind="RoPE",
                size=128,
                length=1024 if quick else 65_504,
                dtype=np.float16,
            ),
        )
    )
    cases.append(
        Case(
            "tables",
            partial(table_construction, kind="AbsolutePE", size=512, length=absolute_length),
        )
    )
    cases.append(Case("cold-start", partial(cold_start, warm=True)))
    if not quick:
        cases.append(Case("cold-start", partial(cold_start, warm=False)))
    return cases
