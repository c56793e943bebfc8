"""The table and the targets as plain text, markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import llvmlite.binding
import numba
import numpy as np

import positional_embeddings
from positional_embeddings import _parallel

from .cases import Row
from .contenders import torch
from .targets import Outcome

__all__ = [
    "COLUMNS",
    "README_END",
    "README_ROWS",
    "README_START",
    "format_markdown",
    "format_summary",
    "format_text",
    "last_level_cache",
    "machine",
    "replace_summary",
    "to_json",
]

COLUMNS = ("case", "shape", "order", "dtype", "median", "GB/s", "vs floor", "vs numpy", "vs torch")

README_ROWS = (
    ("rope(x)", (128, 4096, 32), "float32"),
    ("rope(x)", (64, 100, 256), "float32"),
    ("rope(x)", (128, 2048, 128), "float32"),
    ("rope(x, out=out)", (128, 2048, 128), "float32"),
    ("rope(x, out=x)", (128, 2048, 128), "float32"),
    ("decode rope(x)", (128, 1, 32), "float32"),
    ("pe(x)", (100, 512, 32), "float32"),
    ("pe(x)", (4096, 512, 16), "float32"),
    ("RoPE(128, 131072)", (128, 131072), "float32"),
    ("cold start, warm cache", (), ""),
)
"""The rows the README shows, as (case, shape, dtype), each in every memory
order measured: the LLaMA-like and the Julia docs' shapes, the array Julia's
own timing is for with ``out=`` and in place, a decoding step, the table
construction and the cold start."""

README_START = "<!-- benchmark summary: start (python -m benchmarks --readme README.md) -->"
README_END = "<!-- benchmark summary: end -->"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_VECTORS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4.2", "SSE4.2"))


def _compiled_for() -> tuple[str, str | None]:
    """The CPU Numba compiles for (LLVM's name, such as ``znver3``) and its
    widest x86 vectors, or None (another CPU, or ``NUMBA_CPU_NAME`` set)."""
    if numba.config.CPU_NAME:
        return numba.config.CPU_NAME, None
    features = llvmlite.binding.get_host_cpu_features()
    widest = next((name for feature, name in _VECTORS if features.get(feature)), None)
    return llvmlite.binding.get_host_cpu_name(), widest


_CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def last_level_cache(caches: Path = _CPU_CACHES) -> str | None:
    """The largest cache of CPU 0 as Linux describes it (such as ``L3 32 MiB``),
    or None where it does not.  Which rows fit in it changes their ratios:
    the machines here have had 32 MiB and 260 MiB."""
    units = {"K": 1, "M": 1 << 10, "G": 1 << 20}
    found = []
    for index in caches.glob("index*"):
        try:
            level, size = int((index / "level").read_text()), (index / "size").read_text().strip()
            found.append((level, int(size[:-1]) * units[size[-1:]]))
        except (OSError, ValueError, KeyError):  # unreadable, or a size in no known unit
            continue
    if not found:
        return None
    level, kib = max(found)
    return f"L{level} {kib >> 10} MiB" if kib >= 1 << 10 else f"L{level} {kib} KiB"


def machine() -> dict[str, Any]:
    """Where the run happened: CPU (as Numba compiles for it, too), CPUs
    usable, the last-level cache, the threads (the package's large calls',
    torch's), and the versions that matter."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    compiled_for, vectors = _compiled_for()
    return {
        "cpu": _cpu_model(),
        "compiled_for": compiled_for,
        "vectors": vectors,
        "cpus": cpus,
        "last_level_cache": last_level_cache(),
        "threads": _parallel._threads,
        "torch_threads": None if torch is None else torch.get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "torch": None if torch is None else torch.__version__,
        "positional_embeddings": positional_embeddings.__version__,
    }


def _machine_line(info: dict[str, Any]) -> str:
    versions = ", ".join(
        f"{name} {info[name]}" for name in ("python", "numpy", "numba", "positional_embeddings")
    )
    torch_text = f"torch {info['torch']}" if info["torch"] else "no torch"
    cache = f", {info['last_level_cache']} cache" if info.get("last_level_cache") else ""
    threads = f"large calls on {info['threads']} threads, copies and numpy on 1" + (
        f", torch on {info['torch_threads']}" if info["torch"] else ""
    )
    target = ", ".join(filter(None, (info.get("compiled_for"), info.get("vectors"))))
    cpu = f"{info['cpu']} ({target})" if target else info["cpu"]
    return f"{cpu}, {info['cpus']} CPUs{cache} ({threads}); {versions}, {torch_text}"


def _time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}×"


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.case,
        "×".join(map(str, row.shape)),
        row.order,
        row.dtype,
        _time(row.seconds),
        "" if row.gbps is None else f"{row.gbps:.1f}",
        f"{_ratio(row.vs_floor)} {row.floor}" if row.vs_floor is not None else "",
        _ratio(row.vs_numpy),
        _ratio(row.vs_torch),
    )


def _targets_heading(outcomes: list[Outcome] | None) -> str:
    if outcomes is None:
        return "Targets: not checked with --quick (tiny sizes)."
    if not outcomes:
        return "Targets: none applies to the cases run."
    met = sum(outcome.met for outcome in outcomes)
    return f"Targets: {met} of {len(outcomes)} met."


def format_text(rows: list[Row], outcomes: list[Outcome] | None, info: dict[str, Any]) -> str:
    """The table, aligned in columns, then the targets, one verdict a line.

    ``outcomes`` is None when targets were not checked (``--quick``).
    """
    cells = [COLUMNS, *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = [_machine_line(info), ""]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]
    lines += ["", _targets_heading(outcomes)]
    lines += [
        f"  {'met   ' if o.met else 'MISSED'}  {o.target}: {o.row}: {o.measured}"
        for o in outcomes or []
    ]
    return "\n".join(lines) + "\n"


def _markdown_table(rows: list[Row], info: dict[str, Any]) -> list[str]:
    """The machine line, then the rows as a markdown table."""
    lines = [
        f"Measured on {_machine_line(info)}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    return lines + ["| " + " | ".join(_cells(row)) + " |" for row in rows]


def format_markdown(rows: list[Row], outcomes: list[Outcome] | None, info: dict[str, Any]) -> str:
    """The table and the targets as a markdown fragment (no heading)."""
    lines = _markdown_table(rows, info)
    lines += ["", _targets_heading(outcomes)]
    if outcomes:
        lines.append("")
        lines += [
            f"- {'met' if o.met else '**missed**'}: {o.target}: {o.row}: {o.measured}"
            for o in outcomes
        ]
    return "\n".join(lines) + "\n"


def format_summary(rows: list[Row], outcomes: list[Outcome], info: dict[str, Any]) -> str:
    """The README's part of a full run: the rows of ``README_ROWS`` in the
    table's order (each line as the full markdown table writes it), and how
    many targets the run met."""
    chosen = [row for row in rows if (row.case, row.shape, row.dtype) in README_ROWS]
    lines = _markdown_table(chosen, info)
    lines += ["", f"{_targets_heading(outcomes)} The whole table: `docs/benchmarks.md`."]
    return "\n".join(lines) + "\n"


def replace_summary(text: str, summary: str) -> str:
    """``text`` (the README) with what lies between ``README_START`` and
    ``README_END`` replaced by ``summary``.

    Raises
    ------
    ValueError
        Either marker is missing, or they come in the wrong order.
    """
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(
            f"expected the lines {README_START!r} and then {README_END!r} around the summary"
        )
    head = text[: start + len(README_START)]
    return f"{head}\n\n{summary}\n{text[end:]}"


def to_json(
    rows: list[Row], outcomes: list[Outcome] | None, info: dict[str, Any], settings: dict[str, Any]
) -> str:
    """Machine, settings, rows (with their ratios) and targets (null if not checked)."""
    payload = {
        "machine": info,
        "settings": settings,
        "rows": [row.as_dict() for row in rows],
        "targets": None if outcomes is None else [asdict(outcome) for outcome in outcomes],
    }
    return json.dumps(payload, indent=1, ensure_ascii=False) + "\n"
