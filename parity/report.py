"""The parity table: case by case, how this package's outputs compare with Julia's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .calls import Runner, python_call
from .compare import compare_outputs, describe_failures
from .fixtures import Case

__all__ = ["Row", "format_markdown", "format_text", "replay", "replay_case"]


@dataclass(frozen=True)
class Row:
    """One line of the table.

    Attributes
    ----------
    case, call : str
        The case id and the Julia call.
    input : str
        The input's shape and dtype, if the call takes one.
    max_ulp : int
        Largest distance over all outputs (ULP for floats; see
        :class:`parity.compare.Comparison`).
    differing : int
        Elements that differ, over all outputs.
    bitwise : bool
        Every output bit for bit, or the expected error raised.
    note : str
        What differs, or which errors were raised.
    """

    case: str
    call: str
    input: str
    max_ulp: int
    differing: int
    bitwise: bool
    note: str


def _input_text(case: Case) -> str:
    if case.x is None:
        return ""
    return "×".join(map(str, case.x.shape)) + f" {case.x.dtype}"


def replay_case(case: Case, run: Runner = python_call) -> Row:
    """Run one recorded case and compare with what Julia did.

    Parameters
    ----------
    case : Case
        A recorded case: Julia's outputs, or Julia's error.
    run : callable
        ``run(call, args, x)`` giving outputs by name (default: this package).

    Returns
    -------
    Row
        Bit for bit when every output matches, or when Julia raised and
        ``run`` raised ``ValueError`` or ``TypeError``.
    """
    shape = _input_text(case)
    julia_error = None if case.error is None else case.error["type"]
    try:
        outputs = run(case.call, case.args, case.x)
    except Exception as error:  # reported in the table, whatever it is
        raised = f"raises {type(error).__name__}"
        if julia_error is not None and isinstance(error, (ValueError, TypeError)):
            return Row(case.id, case.call, shape, 0, 0, True, f"{raised}; Julia: {julia_error}")
        return Row(
            case.id,
            case.call,
            shape,
            0,
            sum(value.size for value in case.outputs.values()),
            False,
            f"{raised}: {error}; Julia: {julia_error or 'returns'}",
        )
    if julia_error is not None:
        return Row(case.id, case.call, shape, 0, 0, False, f"returns; Julia: {julia_error}")
    comparisons = compare_outputs(outputs, case.outputs)
    present = [result for result in comparisons.values() if result is not None]
    return Row(
        case.id,
        case.call,
        shape,
        max((result.max_ulp for result in present), default=0),
        sum(result.differing for result in present),
        len(present) == len(comparisons) and all(result.bitwise for result in present),
        describe_failures(comparisons).replace("\n", "; "),
    )


def replay(cases: Iterable[Case], run: Runner = python_call) -> list[Row]:
    """:func:`replay_case` for every case."""
    return [replay_case(case, run) for case in cases]


_COLUMNS = ("case", "call", "input", "max ULP", "differing", "bitwise", "note")


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.case,
        row.call,
        row.input,
        str(row.max_ulp),
        str(row.differing),
        "yes" if row.bitwise else "NO",
        row.note,
    )


def _title(header: Mapping[str, Any]) -> str:
    return (
        f"{header.get('package', 'PositionalEmbeddings.jl')} "
        f"{header.get('package_version', '?')}, Julia {header.get('julia_version', '?')}, "
        f"CPU {header.get('cpu', '?')}"
    )


def _summary(rows: list[Row]) -> str:
    return f"{sum(row.bitwise for row in rows)} of {len(rows)} cases bit for bit"


def format_text(rows: list[Row], header: Mapping[str, Any]) -> str:
    """The table as aligned plain text, with the header and a summary line.

    Parameters
    ----------
    rows : list[Row]
        From :func:`replay`.
    header : Mapping[str, Any]
        Where Julia's outputs come from: ``package``, ``package_version``,
        ``julia_version``, ``cpu`` (a fixtures manifest's header).

    Returns
    -------
    str
        The report.
    """
    cells = [_COLUMNS, *map(_cells, rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]
    return "\n".join([_title(header), "", *lines, "", _summary(rows)])


def format_markdown(rows: list[Row], header: Mapping[str, Any]) -> str:
    """The table in Markdown, for the documentation (arguments as :func:`format_text`)."""
    lines = [f"**{_title(header)}**: {_summary(rows)}.", ""]
    lines.append("| " + " | ".join(_COLUMNS) + " |")
    lines.append("|" + "---|" * len(_COLUMNS))
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(row)) + " |")
    return "\n".join(lines) + "\n"
