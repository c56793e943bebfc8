"""``python -m benchmarks``: the benchmark table, and the project's targets.

    python -m benchmarks [--quick] [--cases NAME ...] [--repeat N]
                         [--markdown PATH] [--json PATH]

Every ratio compares contenders measured in the same process, with
interleaved repetitions (medians): ``vs floor`` is the time over a plain
copy of the same array (``x.copy()`` for calls that allocate, ``np.copyto``
for ``out=``), ``vs numpy`` over the numpy formula, ``vs torch`` over torch
eager (Hugging Face's rotate_half), when torch is installed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .cases import Row, all_cases, torch

__all__ = ["main"]

COLUMNS = ("case", "shape", "order", "dtype", "median", "GB/s", "vs floor", "vs numpy", "vs torch")


def _time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}×"


def _cells(row: Row) -> tuple[str, ...]:
    floor = f"{_ratio(row.vs_floor)} {row.floor}" if row.vs_floor is not None else ""
    gbps = "" if row.gbps is None else f"{row.gbps:.1f}"
    return (
        row.case,
        row.shape,
        row.order,
        row.dtype,
        _time(row.seconds),
        gbps,
        floor,
        _ratio(row.vs_numpy),
        _ratio(row.vs_torch),
    )


def _targets(rows: list[Row]) -> list[tuple[str, bool]]:
    """The project's performance targets, each with whether this run met it."""
    checks: list[tuple[str, bool]] = []

    def find(case: str, shape: str = "", order: str = "", dtype: str = "") -> list[Row]:
        return [
            r
            for r in rows
            if r.case == case
            and (not shape or r.shape == shape)
            and (not order or r.order == order)
            and (not dtype or r.dtype == dtype)
        ]

    for row in find("rope(x)", "128×2048×128") + find("pe(x)", "4096×512×16"):
        checks.append(
            (
                f"{row.case} {row.shape} {row.order} {row.dtype}: ≤ 1.15× x.copy() "
                f"(got {row.vs_floor:.2f}×)",
                (row.vs_floor or 9) <= 1.15,
            )
        )
    for row in find("rope(x, out=out)", "128×2048×128"):
        checks.append(
            (
                f"rope(x, out=out) {row.order}: ≤ 1.15× np.copyto (got {row.vs_floor:.2f}×)",
                (row.vs_floor or 9) <= 1.15,
            )
        )
    for row in find("rope(x, out=x)", "128×2048×128"):
        checks.append(
            (
                f"rope(x, out=x) {row.order}: ≤ 1.10× np.copyto (got {row.vs_floor:.2f}×)",
                (row.vs_floor or 9) <= 1.10,
            )
        )
    for row in find("rope(x, out=out)", "128×512×32"):
        speed = 1 / (row.vs_floor or 1)
        checks.append(
            (
                f"in-cache rope(x, out=out) {row.order}: ≥ 1.3× np.copyto throughput "
                f"(got {speed:.2f}×)",
                speed >= 1.3,
            )
        )
    for row in find("decode rope(x)") + find("decode rope(x, out=out)"):
        checks.append(
            (
                f"{row.case}: ≤ 2 µs (got {row.seconds * 1e6:.2f} µs); Julia 19 µs / 10",
                row.seconds <= 2e-6,
            )
        )
    for row in find("RoPE(128, 131072)"):
        checks.append(
            (f"RoPE(128, 131072): ≤ 100 ms (got {row.seconds * 1e3:.1f} ms)", row.seconds <= 0.1)
        )
    for row in find("cold start, warm cache"):
        checks.append(
            (f"cold start, warm cache: ≤ 1.0 s (got {row.seconds:.2f} s)", row.seconds <= 1.0)
        )
    for row in find("rope(x)", "128×2048×128", dtype="float32"):
        checks.append(
            (
                f"rope(x) {row.order}: ≥ 10× faster than Julia's 264 ms "
                f"(got {row.seconds * 1e3:.1f} ms)",
                row.seconds <= 0.0264,
            )
        )
    for row in find("pe(x)", "4096×512×16"):
        checks.append(
            (
                f"pe(x) {row.order}: ≥ 10× faster than Julia's 140 ms "
                f"(got {row.seconds * 1e3:.1f} ms)",
                row.seconds <= 0.014,
            )
        )
    return checks


def format_text(rows: list[Row], targets: list[tuple[str, bool]]) -> str:
    cells = [COLUMNS] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]
    if targets:
        lines += ["", "targets:"] + [
            f"  [{'met' if ok else 'MISSED'}] {text}" for text, ok in targets
        ]
    return "\n".join(lines)


def format_markdown(rows: list[Row], targets: list[tuple[str, bool]], machine: str) -> str:
    lines = [
        f"Measured on {machine}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    if targets:
        lines += ["", "Targets:", ""]
        lines += [f"- {'met' if ok else '**missed**'}: {text}" for text, ok in targets]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument(
        "--cases",
        nargs="+",
        metavar="NAME",
        help="only these: rope rope-out rope-inplace rope-in-cache decode pe tables cold-start",
    )
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median of)")
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    repeat = args.repeat or (2 if args.quick else 7)
    cases = [
        (name, run)
        for name, run in all_cases(args.quick, repeat)
        if not args.cases or name in args.cases
    ]
    rows = []
    for index, (name, run) in enumerate(cases, 1):
        print(f"[{index}/{len(cases)}] {name}", file=sys.stderr, flush=True)
        rows.append(run())
    targets = [] if args.quick else _targets(rows)
    machine = (
        f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
        + (f", torch {torch.__version__}" if torch is not None else ", no torch")
    )
    print(machine)
    print(format_text(rows, targets))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(format_markdown(rows, targets, machine))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "machine": machine,
            "rows": [asdict(row) for row in rows],
            "targets": [{"target": text, "met": ok} for text, ok in targets],
        }
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
