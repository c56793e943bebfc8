"""MkDocs hook: generate the figures and the parity table before each build.

Both come from the project's own commands, run from the repository root:
``python -m positional_embeddings plot`` and ``python -m parity report``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GENERATED = Path("docs") / "generated"

COMMANDS = [
    [
        "positional_embeddings",
        "plot",
        "absolute",
        "--embedding-size",
        "128",
        "--max-length",
        "100",
        "-o",
        str(GENERATED / "absolute.svg"),
    ],
    [
        "positional_embeddings",
        "plot",
        "rope",
        "--head-size",
        "64",
        "--seq-len",
        "256",
        "-o",
        str(GENERATED / "rope.svg"),
    ],
    ["parity", "report", "--markdown", "--output", str(GENERATED / "parity.md")],
]


def on_pre_build(config: Any) -> None:
    for command in COMMANDS:
        subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=True)
