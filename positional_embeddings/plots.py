"""Figures: the AbsolutePE heatmap of the Julia docs, and RoPE's rotation frequencies.

Matplotlib is an optional dependency (``pip install 'positional_embeddings[plot]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .absolute import AbsolutePE
from .rope import RoPE

__all__ = ["plot_absolute", "plot_rope"]


def _pyplot() -> Any:
    """matplotlib's pyplot, drawing with Agg (to files); ``ImportError``
    where matplotlib is missing, or cannot start in this environment (a
    ``MPLBACKEND`` it does not know raises ``ValueError`` at its import,
    which the command line took for a usage error)."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install 'positional_embeddings[plot]'"
        ) from None
    except ValueError as error:
        raise ImportError(f"matplotlib cannot start here: {error}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_absolute(
    path: str | Path, embedding_size: int = 128, max_length: int = 100, base: float = 10_000
) -> Path:
    """Heatmap of ``AbsolutePE(embedding_size, max_length).embeddings``, like the Julia
    docs' ``AbsolutePE-128-100.svg``; written to ``path`` (``_target``), which
    is returned."""
    plt = _pyplot()
    target = _target(path, plt)
    table = AbsolutePE(embedding_size, max_length, base).embeddings
    figure, axes = plt.subplots(figsize=(8, 5))
    image = axes.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower")
    axes.set_xlabel("position")
    axes.set_ylabel("embedding dimension")
    axes.set_title(f"AbsolutePE({embedding_size}, {max_length}).embeddings")
    figure.colorbar(image, ax=axes)
    return _save(figure, target)


def plot_rope(
    path: str | Path, head_size: int = 64, seq_len: int = 256, base: float = 10_000
) -> Path:
    """RoPE's tables: the cosine of each frequency over positions (left), and the
    rotation of one 2-D pair per frequency band over the first positions (right);
    written to ``path`` (``_target``), which is returned."""
    plt = _pyplot()
    target = _target(path, plt)
    rope = RoPE(head_size, seq_len, base, T=np.float64)
    half = head_size // 2
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    image = left.imshow(
        rope.cos_cached[:half], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower"
    )
    left.set_xlabel("position")
    left.set_ylabel("frequency band i (theta_i = base^(-2i/head_size))")
    left.set_title(f"RoPE({head_size}, {seq_len}).cos_cached[:{half}]")
    figure.colorbar(image, ax=left)
    positions = min(seq_len, 32)
    for band in range(0, half, max(1, half // 4)):
        c = rope.cos_cached[band, :positions]
        s = rope.sin_cached[band, :positions]
        right.plot(c, s, marker="o", markersize=3, linestyle=":", label=f"band {band}")
    right.set_aspect("equal")
    right.set_title(f"(cos, sin) of positions 0..{positions - 1}")
    right.legend(fontsize="small")
    return _save(figure, target)


def _target(path: str | Path, plt: Any) -> Path:
    """The file a figure saved to ``path`` is written to: ``path``, in the
    format its suffix names; without a suffix, matplotlib's default format
    (PNG), whose suffix matplotlib adds.  A directory, or no name at all,
    raises ``IsADirectoryError`` (matplotlib would write ``<dir>.png``)."""
    target = Path(path)
    if not target.name or target.is_dir():
        raise IsADirectoryError(
            f"{str(path)!r} is not a file name (a directory, or empty); give one such as figure.svg"
        )
    if not target.suffix:
        target = target.with_name(f"{target.name}.{plt.rcParams['savefig.format']}")
    return target


def _save(figure: Any, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(target)
    figure.clear()
    return target
