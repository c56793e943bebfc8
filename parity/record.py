"""Run the case matrix through Julia, and record it in the format of ``parity/fixtures``.

``python -m parity record --out DIR`` writes ``DIR/manifest.json`` and
``DIR/arrays.npz``; :func:`parity.fixtures.load` reads them back, so a
recording can be replayed (``pytest`` and ``python -m parity report`` use
``parity/fixtures``: copy a new recording there, with its provenance in the
README, to make it the reference).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .bridge import JuliaCallError, julia_call, julia_header
from .calls import Runner
from .cases import CaseSpec, all_cases
from .fixtures import Case, save

__all__ = ["record", "run_matrix"]


def run_matrix(specs: Iterable[CaseSpec] | None = None, run: Runner = julia_call) -> list[Case]:
    """Run cases and keep what they returned or raised.

    Parameters
    ----------
    specs : Iterable[CaseSpec], optional
        The cases (default: the whole matrix, :func:`parity.cases.all_cases`).
    run : callable
        ``run(call, args, x)`` returning outputs by name and raising
        :class:`parity.bridge.JuliaCallError` (default: Julia itself).

    Returns
    -------
    list[Case]
        Each case with its input and outputs, or its error, and whether
        this port is stricter than Julia there.
    """
    cases = []
    for spec in all_cases() if specs is None else specs:
        x = spec.build_input()
        try:
            outputs, error = run(spec.call, spec.args, x), None
        except JuliaCallError as failure:
            outputs, error = {}, {"type": failure.type_name, "message": failure.message}
        cases.append(
            Case(spec.id, spec.call, spec.args, x, outputs, error, spec.stricter_than_julia)
        )
    return cases


def record(directory: Path, specs: Iterable[CaseSpec] | None = None) -> int:
    """Record cases from Julia into ``directory`` (manifest.json and arrays.npz).

    Parameters
    ----------
    directory : pathlib.Path
        Where to write; created if needed.
    specs : Iterable[CaseSpec], optional
        The cases (default: the whole matrix).

    Returns
    -------
    int
        How many cases were recorded.

    Raises
    ------
    RuntimeError
        If Julia cannot be started (see :func:`parity.bridge.julia`).
    """
    header = julia_header()
    return save(directory, header, run_matrix(specs))
