"""MkDocs hook: generate the figures and the parity table before each build."""

from __future__ import annotations

from pathlib import Path
from typing import Any

GENERATED = Path(__file__).parent / "generated"


def on_pre_build(config: Any) -> None:
    from parity.fixtures import load
    from parity.report import format_markdown, replay
    from positional_embeddings.plots import plot_absolute, plot_rope

    GENERATED.mkdir(exist_ok=True)
    plot_absolute(GENERATED / "absolute.svg", 128, 100)
    plot_rope(GENERATED / "rope.svg", 64, 256)
    header, cases = load()
    (GENERATED / "parity.md").write_text(format_markdown(replay(cases), header))
