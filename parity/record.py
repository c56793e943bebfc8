"""Record fixtures from the real Julia package, in the format of ``parity/fixtures``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .bridge import JuliaCallError, julia_call, julia_version
from .cases import CaseSpec, all_cases, make_input

__all__ = ["record"]

LAYOUT = (
    "every array has the same shape tuple as in Julia; "
    "element [i,j,k] (Python) = A[i+1,j+1,k+1] (Julia)"
)


def record(directory: Path, cases: Iterable[CaseSpec] | None = None) -> int:
    """Run ``cases`` (default: the whole matrix) in Julia; write manifest.json and
    arrays.npz into ``directory``.  Returns the number of cases recorded."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    entries: list[dict[str, Any]] = []
    for case in all_cases() if cases is None else cases:
        entry: dict[str, Any] = {"id": case.id, "call": case.call, "args": case.args}
        x = None
        if case.x is not None:
            x = make_input(case.x)
            entry["x"] = arrays_key = f"{case.id}.x"
            arrays[arrays_key] = x
        try:
            outputs = julia_call(case.call, case.args, x)
        except JuliaCallError as error:
            entry["error"] = {"type": error.type_name, "message": str(error)}
        else:
            entry["outputs"] = {}
            for name, value in outputs.items():
                entry["outputs"][name] = key = f"{case.id}.{name}"
                arrays[key] = value
        entries.append(entry)
    manifest = {**julia_version(), "layout": LAYOUT, "cases": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    save: Any = np.savez_compressed
    save(directory / "arrays.npz", **arrays)
    return len(entries)
