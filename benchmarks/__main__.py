"""``python -m benchmarks``: the benchmark table, and the project's targets.

Every ratio compares contenders measured in the same process, in
interleaved repetitions (medians): ``vs floor`` is the package's time over a
plain copy of the same array (``x.copy()`` in ``x``'s memory order for calls
that allocate, ``np.copyto`` for ``out=`` and in place), ``vs numpy`` over
the numpy formula, ``vs torch`` over torch eager (Hugging Face's
rotate_half), when torch is installed.  The numpy formula and torch always
allocate their result, in ``x``'s memory order, also on the rows where the
package writes into ``out`` or in place.  The package splits calls of 8 MiB
of memory traffic or more over one thread per usable CPU; the copies and the
numpy formula run on one thread, torch on as many as it takes by default
(the table's first line says how many).  GB/s counts the bytes of the input
read and of the output written, not the tables read: small beside them but
for a batch of a few columns.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from positional_embeddings._output import exit_with, unwritable

from .cases import GROUPS, Row, Settings, all_cases
from .report import (
    format_markdown,
    format_summary,
    format_text,
    machine,
    replace_summary,
    to_json,
)
from .targets import check_targets

__all__ = ["main", "parse_arguments"]


PROG = "python -m benchmarks"
"""The command's name in its usage and errors, unless given another."""


def parse_arguments(argv: Sequence[str] | None = None, prog: str = PROG) -> argparse.Namespace:
    """The command line: ``--quick``, ``--cases``, ``--repeat``, ``--markdown``, ``--json``,
    ``--readme``; ``prog`` names the command in its usage."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(__doc__ or "").split("\n\n", 1)[1].replace("\n", " "),
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, two repetitions: a smoke run (about a minute)",
    )
    parser.add_argument(
        "--cases", nargs="+", choices=GROUPS, metavar="NAME", help=f"only these: {' '.join(GROUPS)}"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="repetitions, of which the median (default 7; 2 with --quick)",
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="also write a markdown table")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    parser.add_argument(
        "--readme",
        type=Path,
        metavar="PATH",
        help="also put the summary of a full run between the summary markers of this file",
    )
    arguments = parser.parse_args(argv)
    if arguments.repeat is not None and arguments.repeat < 1:
        parser.error("--repeat must be at least 1")
    if arguments.readme and (arguments.quick or arguments.cases):
        parser.error("--readme takes a full run: no --quick, no --cases")
    return arguments


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Run the cases, print the table and the targets, write the files asked for.

    Progress goes to standard error, the table to standard output.  Returns
    the exit status: 0 (a missed target is reported, not an error); 2, before
    any case runs, for a file to write that cannot be written or a
    ``--readme`` file that cannot be read or lacks the summary markers; 1 when
    writing a file fails after the run (the table is printed by then).
    ``prog`` names the command in its usage and errors.
    """
    arguments = parse_arguments(argv, prog)

    def error(message: str) -> None:
        print(f"{prog}: error: {message}", file=sys.stderr)

    for path in filter(None, (arguments.markdown, arguments.json, arguments.readme)):
        reason = unwritable(path)
        if reason is not None:  # found before the run, not after minutes of it
            error(f"{path}: {reason}")
            return 2
    readme = None
    if arguments.readme:  # a file without the markers fails before the run, not after it
        try:
            readme = arguments.readme.read_text(encoding="utf-8")
            replace_summary(readme, "")
        except (OSError, ValueError) as failure:
            error(f"{arguments.readme}: {failure}")
            return 2
    settings = Settings(arguments.quick, arguments.repeat or (2 if arguments.quick else 7))
    cases = [
        case for case in all_cases(settings.quick) if case.group in (arguments.cases or GROUPS)
    ]
    rows: list[Row] = []
    for number, case in enumerate(cases, 1):
        print(f"[{number}/{len(cases)}] {case.group}", file=sys.stderr, flush=True)
        rows.append(case.run(settings))
        gc.collect()  # the large arrays of one case are gone before the next
    outcomes = None if settings.quick else check_targets(rows)
    info = machine()
    sys.stdout.write(format_text(rows, outcomes, info))
    files: list[tuple[Path, str]] = []
    if arguments.markdown:
        files.append((arguments.markdown, format_markdown(rows, outcomes, info)))
    if readme is not None:
        summary = format_summary(rows, outcomes or [], info)
        files.append((arguments.readme, replace_summary(readme, summary)))
    if arguments.json:
        run = {"quick": settings.quick, "repeat": settings.repeat, "cases": arguments.cases}
        files.append((arguments.json, to_json(rows, outcomes, info, run)))
    status = 0
    for path, text in files:
        try:
            _write(path, text)
        except OSError as failure:
            error(f"{path}: {failure}")
            status = 1
    return status


if __name__ == "__main__":
    exit_with(main, PROG)
