"""The table and the targets as plain text, markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numba
import numpy as np

import positional_embeddings

from .cases import Row
from .contenders import torch
from .targets import Outcome

__all__ = ["COLUMNS", "format_markdown", "format_text", "machine", "to_json"]

COLUMNS = ("case", "shape", "order", "dtype", "median", "GB/s", "vs floor", "vs numpy", "vs torch")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Where the run happened: CPU, CPUs usable, and the versions that matter."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return {
        "cpu": _cpu_model(),
        "cpus": cpus,
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
    return f"{info['cpu']}, {info['cpus']} CPUs; {versions}, {torch_text}"


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


def format_markdown(rows: list[Row], outcomes: list[Outcome] | None, info: dict[str, Any]) -> str:
    """The table and the targets as a markdown fragment (no heading)."""
    lines = [
        f"Measured on {_machine_line(info)}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    lines += ["", _targets_heading(outcomes)]
    if outcomes:
        lines.append("")
        lines += [
            f"- {'met' if o.met else '**missed**'}: {o.target}: {o.row}: {o.measured}"
            for o in outcomes
        ]
    return "\n".join(lines) + "\n"


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
