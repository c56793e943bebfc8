"""``python -m parity``: the parity report, and the recorder.

    python -m parity report [--markdown] [--live] [--output FILE]
    python -m parity record --out DIR

``report`` replays the recorded Julia outputs in ``parity/fixtures`` (no Julia
needed); with ``--live`` it runs the case matrix against your Julia instead.
Exit codes: 0 every case bit for bit, 1 a difference or no Julia for
``--live``/``record``, 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _report(args: argparse.Namespace) -> int:
    from .fixtures import load
    from .report import format_markdown, format_text, replay

    if args.live:
        from .bridge import julia_available, julia_call, julia_version
        from .cases import all_cases, make_input
        from .fixtures import Case

        available, reason = julia_available()
        if not available:
            print(f"python -m parity report --live: {reason}", file=sys.stderr)
            return 1
        header = julia_version()
        cases = []
        for spec in all_cases():
            x = None if spec.x is None else make_input(spec.x)
            cases.append(_live_case(spec, x, julia_call, Case))
    else:
        header, cases = load()
    print(f"replaying {len(cases)} cases…", file=sys.stderr)
    rows = replay(cases)
    text = format_markdown(rows, header) if args.markdown else format_text(rows, header)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    else:
        print(text)
    return 0 if all(row.bitwise for row in rows) else 1


def _live_case(spec, x, julia_call, Case):  # type: ignore[no-untyped-def]
    from .bridge import JuliaCallError

    try:
        outputs, error = julia_call(spec.call, spec.args, x), None
    except JuliaCallError as failure:
        outputs, error = {}, {"type": failure.type_name, "message": failure.message}
    return Case(spec.id, spec.call, spec.args, x, outputs, error)


def _record(args: argparse.Namespace) -> int:
    from .bridge import julia_available
    from .record import record

    available, reason = julia_available()
    if not available:
        print(f"python -m parity record: {reason}", file=sys.stderr)
        return 1
    count = record(Path(args.out))
    print(f"recorded {count} cases into {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parity", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report", help="how this package compares with Julia, case by case"
    )
    report.add_argument("--markdown", action="store_true", help="a markdown table (for the docs)")
    report.add_argument("--live", action="store_true", help="against your Julia, not the fixtures")
    report.add_argument("--output", help="write the table to this file")
    record = commands.add_parser("record", help="record new fixtures from your Julia")
    record.add_argument("--out", required=True, help="directory for manifest.json and arrays.npz")
    args = parser.parse_args(argv)
    return _report(args) if args.command == "report" else _record(args)


if __name__ == "__main__":
    sys.exit(main())
