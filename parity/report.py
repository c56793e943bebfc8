"""The parity table: each case, how this package's outputs compare with Julia's."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .calls import python_call
from .compare import compare
from .fixtures import Case

__all__ = ["Row", "format_markdown", "format_text", "replay"]


@dataclass(frozen=True)
class Row:
    case: str
    call: str
    shape: str
    max_ulp: int
    differing: int
    bitwise: bool
    note: str


def _shape(case: Case) -> str:
    if case.x is not None:
        return "x " + "×".join(map(str, case.x.shape)) + f" {case.x.dtype}"
    return ""


def replay(
    cases: Iterable[Case],
    run: Callable[[str, dict[str, Any], np.ndarray | None], dict[str, np.ndarray]] = python_call,
) -> list[Row]:
    """Run every case through ``run`` and compare with the recorded outputs."""
    rows = []
    for case in cases:
        if case.error is not None:
            try:
                run(case.call, case.args, case.x)
            except (TypeError, ValueError) as error:
                rows.append(
                    Row(
                        case.id,
                        case.call,
                        _shape(case),
                        0,
                        0,
                        True,
                        f"raises {type(error).__name__} (Julia: {case.error['type']})",
                    )
                )
            else:
                rows.append(
                    Row(
                        case.id,
                        case.call,
                        _shape(case),
                        0,
                        0,
                        False,
                        f"no error (Julia: {case.error['type']})",
                    )
                )
            continue
        outputs = run(case.call, case.args, case.x)
        worst, differing, bitwise, notes = 0, 0, True, []
        for name, expected in case.outputs.items():
            result = compare(np.asarray(outputs[name]), expected)
            worst = max(worst, result.max_ulp)
            differing += result.differing
            bitwise &= result.bitwise
            if not result.bitwise:
                notes.append(f"{name}: {result.describe()}")
        rows.append(
            Row(case.id, case.call, _shape(case), worst, differing, bitwise, "; ".join(notes))
        )
    return rows


_COLUMNS = ("case", "call", "input", "max ULP", "differing", "bitwise", "note")


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.case,
        row.call,
        row.shape,
        str(row.max_ulp),
        str(row.differing),
        "yes" if row.bitwise else "NO",
        row.note,
    )


def _summary(rows: list[Row]) -> str:
    exact = sum(row.bitwise for row in rows)
    return f"{exact} of {len(rows)} cases bit for bit"


def format_text(rows: list[Row], header: dict[str, Any]) -> str:
    lines = [_title(header), ""]
    cells = [_COLUMNS] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    for line in cells:
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )
    lines += ["", _summary(rows)]
    return "\n".join(lines)


def format_markdown(rows: list[Row], header: dict[str, Any]) -> str:
    lines = [f"**{_title(header)}**: {_summary(rows)}.", ""]
    lines.append("| " + " | ".join(_COLUMNS) + " |")
    lines.append("|" + "---|" * len(_COLUMNS))
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(row)) + " |")
    return "\n".join(lines) + "\n"


def _title(header: dict[str, Any]) -> str:
    return (
        f"{header.get('package', 'PositionalEmbeddings.jl')} "
        f"{header.get('package_version', '?')} on Julia {header.get('julia_version', '?')} "
        f"({header.get('cpu', '?')} CPU)"
    )
