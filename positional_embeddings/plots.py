"""Figures: the AbsolutePE heatmap of the Julia docs, and RoPE's rotation frequencies.

Matplotlib is an optional dependency (``pip install 'positional_embeddings[plot]'``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ._output import unwritable
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
    is returned.  Sizes that leave the table empty raise ``ValueError``."""
    plt = _pyplot()
    target = _target(path, plt)
    table = AbsolutePE(embedding_size, max_length, base).embeddings
    title = f"AbsolutePE({embedding_size}, {max_length}).embeddings"
    _check_drawable(table, title)
    figure, axes = plt.subplots(figsize=(8, 5))
    image = axes.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower")
    axes.set_xlabel("position")
    axes.set_ylabel("embedding dimension")
    axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return _save(figure, target)


def plot_rope(
    path: str | Path, head_size: int = 64, seq_len: int = 256, base: float = 10_000
) -> Path:
    """RoPE's tables: the cosine of each frequency over positions (left), and the
    rotation of one 2-D pair per frequency band over the first positions (right);
    written to ``path`` (``_target``), which is returned.  Sizes that leave
    the tables empty raise ``ValueError``."""
    plt = _pyplot()
    target = _target(path, plt)
    rope = RoPE(head_size, seq_len, base, T=np.float64)
    half = head_size // 2
    title = f"RoPE({head_size}, {seq_len}).cos_cached[:{half}]"
    _check_drawable(rope.cos_cached[:half], title)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    image = left.imshow(
        rope.cos_cached[:half], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower"
    )
    left.set_xlabel("position")
    left.set_ylabel("frequency band i (theta_i = base^(-2i/head_size))")
    left.set_title(title)
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


def _check_drawable(table: np.ndarray, name: str) -> None:
    """A table with no entries draws an empty figure (and matplotlib
    warns): ``ValueError`` instead."""
    if not table.size:
        raise ValueError(
            f"nothing to draw: {name} has shape {table.shape}; give sizes of 1 or more"
        )


def _target(path: str | Path, plt: Any) -> Path:
    """The file a figure saved to ``path`` is written to: ``path``, in the
    format its suffix names; without a suffix, matplotlib's default format
    (PNG), whose suffix matplotlib adds.  Refused before any work, as
    ``OSError``: a directory, or a name that names one (no name at all, a
    trailing slash: matplotlib would write ``<dir>.png``), an existing file
    without a suffix that is no regular file (a device: ``/dev/null`` would
    become ``/dev/null.png``), a path that cannot be written
    (``unwritable``).  A format matplotlib does not write raises
    ``ValueError`` (matplotlib's own check came after the folders were
    made)."""
    from matplotlib.backend_bases import FigureCanvasBase

    text = str(path)
    target = Path(path)
    if not target.name or target.is_dir() or text.endswith(("/", os.sep)):
        raise IsADirectoryError(
            f"{text!r} is not a file name (a directory, or empty); give one such as figure.svg"
        )
    if not target.suffix:
        if target.exists() and not target.is_file():
            raise OSError(
                f"{text!r} is not a regular file to write a figure to, nor does its name "
                "say a format; give a name such as figure.svg"
            )
        target = target.with_name(f"{target.name}.{plt.rcParams['savefig.format']}")
    formats = FigureCanvasBase.get_supported_filetypes()
    if target.suffix[1:].lower() not in formats:
        raise ValueError(
            f"Format {target.suffix[1:]!r} is not supported (supported formats: "
            f"{', '.join(sorted(formats))})"
        )
    reason = unwritable(target)
    if reason is not None:
        raise OSError(f"{target}: {reason}")
    return target


def _save(figure: Any, target: Path) -> Path:
    """Write ``figure`` to ``target``, making its missing folders; where
    writing fails (the LaTeX that PGF needs, missing), the file and the
    folders made are removed before the error propagates."""
    made = [folder for folder in target.parents if not folder.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    try:
        figure.tight_layout()
        figure.savefig(target)
    except BaseException:
        if not existed:
            target.unlink(missing_ok=True)
        for folder in made:  # the deepest first
            try:
                folder.rmdir()
            except OSError:  # not empty (another program's file): kept
                break
        raise
    finally:
        figure.clear()
    return target
