"""The recorded Julia outputs in ``parity/fixtures``: manifest and arrays."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FIXTURES", "Case", "load"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True)
class Case:
    """One recorded call: its input, and Julia's outputs or error."""

    id: str
    call: str
    args: dict[str, Any]
    x: np.ndarray | None
    outputs: dict[str, np.ndarray]
    error: dict[str, str] | None


def load(directory: Path = FIXTURES) -> tuple[dict[str, Any], list[Case]]:
    """The manifest's header (Julia version, CPU, package) and every case."""
    manifest = json.loads((directory / "manifest.json").read_text())
    with np.load(directory / "arrays.npz") as arrays:
        cases = [
            Case(
                id=entry["id"],
                call=entry["call"],
                args=entry["args"],
                x=arrays[entry["x"]] if "x" in entry else None,
                outputs={name: arrays[key] for name, key in entry.get("outputs", {}).items()},
                error=entry.get("error"),
            )
            for entry in manifest["cases"]
        ]
    header = {key: value for key, value in manifest.items() if key != "cases"}
    return header, cases
