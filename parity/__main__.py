"""Parity with PositionalEmbeddings.jl: the report, and the recorder.

    python -m parity report [--markdown] [--live] [--output FILE]
    python -m parity record --out DIR

``report`` replays the recorded Julia outputs in ``parity/fixtures`` (no
Julia needed) and prints, case by case, the call, the largest distance in
ULP, how many elements differ and whether the outputs are bit for bit, under
a header naming the Julia version, package version and CPU of the
recording.  ``--live`` runs the case matrix through your Julia instead.
``record`` writes the case matrix's Julia outputs in the fixtures' format.

Exit codes: 0 when every case is bit for bit (or recorded), 1 when a case
differs, the recording has no cases, or Julia is needed and not available,
2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

__all__ = ["main", "run"]

PROG = "python -m parity"
"""The command's name in its usage and errors, unless given another."""

_RECORDED = ("manifest.json", "arrays.npz")
"""The files ``record`` writes into its directory."""


def _start_julia(command: str) -> bool:
    """Start Julia before anything imports Numba (the package's import:
    nothing here imports it before); say why not on stderr."""
    from .bridge import julia, julia_available

    available, reason = julia_available()
    if available:
        try:
            julia()
        except RuntimeError as error:
            available, reason = False, str(error)
    if not available:
        print(f"{command}: {reason}", file=sys.stderr)
    return available


def _refused(command: str, paths: Sequence[Path]) -> bool:
    """Whether one of ``paths`` cannot be written (said on stderr): found
    before the replay or the recording, not after minutes of it.  Imports
    the package: after Julia's start, where Julia is wanted."""
    from positional_embeddings._output import unwritable

    for path in paths:
        reason = unwritable(path)
        if reason is not None:
            print(f"{command}: {path}: {reason}", file=sys.stderr)
            return True
    return False


def _report(args: argparse.Namespace, command: str) -> int:
    if args.live and not _start_julia(f"{command} --live"):
        return 1
    if args.output is not None and _refused(command, [Path(args.output)]):
        return 1
    from .fixtures import load
    from .report import format_markdown, format_text, replay

    if args.live:
        from .bridge import julia_header
        from .record import run_matrix

        header, cases = julia_header(), run_matrix()
    else:
        header, cases = load()
    if not cases:
        print(f"{command}: the recording has no cases", file=sys.stderr)
        return 1
    rows = replay(cases)
    text = (format_markdown if args.markdown else format_text)(rows, header)
    if args.output is not None:
        try:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            Path(args.output).write_text(text)
        except OSError as error:
            print(f"{command}: {error}", file=sys.stderr)
            return 1
    else:
        print(text)
    return 0 if all(row.bitwise for row in rows) else 1


def _record(args: argparse.Namespace, command: str) -> int:
    if not _start_julia(command):
        return 1
    directory = Path(args.out)
    if _refused(command, [directory / name for name in _RECORDED]):
        return 1
    from .record import record

    try:
        count = record(directory)
    except OSError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 1
    print(f"recorded {count} cases into {args.out}")
    return 0


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : Sequence[str], optional
        Arguments after ``python -m parity`` (default: ``sys.argv[1:]``).
    prog : str, default "python -m parity"
        The command's name in its usage and errors.

    Returns
    -------
    int
        The exit code.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Parity with PositionalEmbeddings.jl: the report, and the recorder.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report", help="how this package compares with Julia, case by case"
    )
    report.add_argument("--markdown", action="store_true", help="a Markdown table (for the docs)")
    report.add_argument(
        "--live", action="store_true", help="run the case matrix through your Julia instead"
    )
    report.add_argument("--output", help="write the table to this file instead of stdout")
    record = commands.add_parser("record", help="record the case matrix from your Julia")
    record.add_argument("--out", required=True, help="directory for manifest.json and arrays.npz")
    args = parser.parse_args(argv)
    command = f"{prog} {args.command}"
    return _report(args, command) if args.command == "report" else _record(args, command)


def run(argv: Sequence[str] | None = None, prog: str = PROG) -> NoReturn:
    """Exit with ``main(argv, prog)``'s status, without a traceback where
    the output cannot be written: ``positional_embeddings._output``'s
    ``exit_with``, spelt out, for importing it would import the package,
    and Numba, before Julia starts."""
    try:
        status = main(argv, prog)
        sys.stdout.flush()
    except OSError as error:
        from positional_embeddings._output import abandon_output

        status = abandon_output(error, prog)
    sys.exit(status)


if __name__ == "__main__":
    run()
