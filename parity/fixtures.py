"""Recorded Julia outputs on disk: ``manifest.json`` and ``arrays.npz``.

The format is described in ``parity/fixtures/README.md``: the manifest has
a header (``julia_version``, ``cpu``, ``package``, ``package_version``,
``layout``) and ``cases``, each with ``id``, ``call``, ``args``, an optional
``x`` (key of the input in ``arrays.npz``) and either ``outputs`` (name to
key) or ``error`` (``type`` and ``message`` of the Julia exception); and
``stricter_than_julia: true`` where this port raises on purpose although
Julia answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FIXTURES", "LAYOUT", "Case", "load", "save"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"

LAYOUT = (
    "every array has the same shape tuple as in Julia; "
    "element [i,j,k] (Python) = A[i+1,j+1,k+1] (Julia)"
)


@dataclass(frozen=True)
class Case:
    """One recorded call: its input, and Julia's outputs or error.

    Attributes
    ----------
    id, call, args
        As in the manifest (Julia's keyword names and conventions).
    x : numpy.ndarray or None
        The input, if the call takes one.
    outputs : dict[str, numpy.ndarray]
        Julia's outputs by name; empty if Julia raised.
    error : dict[str, str] or None
        ``type`` and ``message`` of Julia's exception, if it raised.
    stricter_than_julia : bool
        This port raises a ``ValueError`` on purpose where Julia answers
        (``parity.cases.CaseSpec.stricter_than_julia``).
    """

    id: str
    call: str
    args: dict[str, Any]
    x: np.ndarray | None
    outputs: dict[str, np.ndarray]
    error: dict[str, str] | None
    stricter_than_julia: bool = False


def load(directory: Path = FIXTURES) -> tuple[dict[str, Any], list[Case]]:
    """Read a recording.

    Parameters
    ----------
    directory : pathlib.Path
        Holds ``manifest.json`` and ``arrays.npz`` (default: ``parity/fixtures``).

    Returns
    -------
    header : dict[str, Any]
        Everything in the manifest but its cases (Julia version, CPU, ...).
    cases : list[Case]
        Every case, arrays loaded.
    """
    manifest = json.loads((Path(directory) / "manifest.json").read_text())
    with np.load(Path(directory) / "arrays.npz") as arrays:
        cases = [
            Case(
                id=entry["id"],
                call=entry["call"],
                args=entry["args"],
                x=arrays[entry["x"]] if "x" in entry else None,
                outputs={name: arrays[key] for name, key in entry.get("outputs", {}).items()},
                error=entry.get("error"),
                stricter_than_julia=entry.get("stricter_than_julia", False),
            )
            for entry in manifest["cases"]
        ]
    header = {key: value for key, value in manifest.items() if key != "cases"}
    return header, cases


def save(directory: Path, header: Mapping[str, Any], cases: Iterable[Case]) -> int:
    """Write a recording that :func:`load` reads back.

    Parameters
    ----------
    directory : pathlib.Path
        Created if needed; ``manifest.json`` and ``arrays.npz`` are replaced.
    header : Mapping[str, Any]
        Julia version, CPU, package and its version (``layout`` is added).
    cases : Iterable[Case]
        The cases, with Julia's outputs or errors.

    Returns
    -------
    int
        How many cases were written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    entries: list[dict[str, Any]] = []
    for case in cases:
        entry: dict[str, Any] = {"id": case.id, "call": case.call, "args": case.args}
        if case.stricter_than_julia:
            entry["stricter_than_julia"] = True
        if case.x is not None:
            entry["x"] = f"{case.id}.x"
            arrays[entry["x"]] = case.x
        if case.error is not None:
            entry["error"] = dict(case.error)
        else:
            entry["outputs"] = {name: f"{case.id}.{name}" for name in case.outputs}
            arrays.update({f"{case.id}.{name}": value for name, value in case.outputs.items()})
        entries.append(entry)
    manifest = {**header, "layout": LAYOUT, "cases": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    # numpy's stubs confuse **arrays with the allow_pickle keyword
    np.savez_compressed(directory / "arrays.npz", **arrays)  # type: ignore[arg-type]
    return len(entries)
