"""The parity table: case by case, how this package's outputs compare with Julia's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .calls import CaseError, Runner, python_call, python_errors
from .cases import LAYOUTS, lay_out
from .compare import Comparison, compare_outputs, describe_failures
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

    A call that takes an input runs on it in each of the layouts
    :data:`parity.cases.LAYOUTS` (C, F, strided), rebuilt from the
    recorded array: Julia's outputs do not depend on them, so each must
    give the same bits, and leave its input as it was.

    Parameters
    ----------
    case : Case
        A recorded case: Julia's outputs, or Julia's error.
    run : callable
        ``run(call, args, x)`` giving outputs by name (default: this package).

    Returns
    -------
    Row
        Bit for bit when every output matches in every layout; where Julia
        raised, when ``run`` raised this port's counterpart of Julia's
        exception (:func:`parity.calls.python_errors`); where this port is
        stricter than Julia, when ``run`` raised a ``ValueError``.  Not
        when the case recorded neither outputs nor an error, nor when
        ``run`` raised anything else (a :class:`parity.calls.CaseError`
        among them).
    """
    shape = _input_text(case)
    julia = "returns" if case.error is None else case.error["type"]
    expected: tuple[type[Exception], ...] = ()
    if case.stricter_than_julia:
        expected = (ValueError,)
    elif case.error is not None:
        expected = python_errors(case.error["type"])
    elif not case.outputs:
        return Row(case.id, case.call, shape, 0, 0, False, "Julia recorded no outputs")
    layouts = {"": None} if case.x is None else {name: lay_out(case.x, name) for name in LAYOUTS}
    comparisons: dict[str, Comparison | None] = {}
    differ, raised = [], ""
    for layout, x in layouts.items():
        before = None if x is None else x.tobytes()
        try:
            outputs, failure = run(case.call, case.args, x), None
        except Exception as error:  # reported in the table, whatever it is
            outputs, failure = {}, error
        if x is not None and x.tobytes() != before:
            note = f"modified its input (in {layout} layout)"
            return Row(case.id, case.call, shape, 0, 0, False, note)
        if failure is not None:
            raised = f"raises {type(failure).__name__}"
            if isinstance(failure, expected) and not isinstance(failure, CaseError):
                continue
            differing = sum(value.size for value in case.outputs.values())
            note = f"{raised}: {failure}; Julia: {julia}"
            return Row(case.id, case.call, shape, 0, differing, False, note)
        if expected:
            where = f" (in {layout} layout)" if layout else ""
            return Row(case.id, case.call, shape, 0, 0, False, f"returns{where}; Julia: {julia}")
        found = compare_outputs(outputs, case.outputs)
        if describe_failures(found):
            differ.append(layout)
        for name, result in found.items():
            comparisons[name] = _worse(comparisons.get(name, result), result)
    if expected:
        stricter = " (stricter on purpose)" if case.stricter_than_julia else ""
        return Row(case.id, case.call, shape, 0, 0, True, f"{raised}{stricter}; Julia: {julia}")
    present = [result for result in comparisons.values() if result is not None]
    note = describe_failures(comparisons).replace("\n", "; ")
    if note and case.x is not None:
        note += f" (in {', '.join(differ)} layout{'s' * (len(differ) > 1)})"
    return Row(
        case.id,
        case.call,
        shape,
        max((result.max_ulp for result in present), default=0),
        sum(result.differing for result in present),
        len(present) == len(comparisons) and all(result.bitwise for result in present),
        note,
    )


def _worse(a: Comparison | None, b: Comparison | None) -> Comparison | None:
    """Of one output's comparisons in two layouts, the one that differs
    more (None: the output is missing in one)."""
    if a is None or b is None:
        return None
    return max(a, b, key=lambda result: (not result.bitwise, result.differing, result.max_ulp))


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
