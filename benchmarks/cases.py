"""The benchmark cases: each returns one row of the table."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from positional_embeddings import AbsolutePE, RoPE

from .timing import interleaved_medians

__all__ = ["Row", "all_cases"]

ROOT = Path(__file__).resolve().parents[1]

try:
    import torch
except ImportError:
    torch = None


@dataclass
class Row:
    case: str
    shape: str
    order: str
    dtype: str
    seconds: float
    gbps: float | None = None
    vs_floor: float | None = None
    floor: str = ""
    vs_numpy: float | None = None
    vs_torch: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _neg_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[0] // 2
    return np.concatenate([-x[half:], x[:half]], axis=0)


def _rope_numpy(rope: RoPE) -> Callable[[np.ndarray], np.ndarray]:
    def formula(x: np.ndarray) -> np.ndarray:
        seq = x.shape[1]
        cos = rope.cos_cached[:, :seq, np.newaxis]
        sin = rope.sin_cached[:, :seq, np.newaxis]
        return x * cos + _neg_half(x) * sin

    return formula


def _rope_torch(rope: RoPE, x: np.ndarray) -> Callable[[], Any] | None:
    if torch is None:
        return None
    tensor = torch.from_numpy(x)
    seq, half = x.shape[1], x.shape[0] // 2
    cos = torch.from_numpy(np.ascontiguousarray(rope.cos_cached[:, :seq, np.newaxis]))
    sin = torch.from_numpy(np.ascontiguousarray(rope.sin_cached[:, :seq, np.newaxis]))

    def rotate_half() -> Any:  # Hugging Face's rotate_half, on the head axis
        return tensor * cos + torch.cat((-tensor[half:], tensor[:half]), dim=0) * sin

    return rotate_half


def _make(shape: tuple[int, ...], dtype: Any, order: str) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return np.asarray(x, order=order)


def _describe(shape: tuple[int, ...]) -> str:
    return "×".join(map(str, shape))


def rope_forward(shape: tuple[int, ...], dtype: Any, order: str, repeat: int) -> Row:
    """``rope(x)`` against ``x.copy()``, the numpy formula and torch eager."""
    rope = RoPE(shape[0], shape[1], T=np.float32)
    x = _make(shape, dtype, order)
    contenders: dict[str, Callable[[], object]] = {
        "copy": lambda: x.copy(order="K"),
        "ours": lambda: rope(x),
        "numpy": lambda: _rope_numpy(rope)(x),
    }
    torch_call = _rope_torch(rope, x)
    if torch_call is not None:
        contenders["torch"] = torch_call
    times = interleaved_medians(contenders, repeat)
    return _row("rope(x)", shape, order, x, times, "x.copy()", "copy")


def rope_out(shape: tuple[int, ...], dtype: Any, order: str, repeat: int, in_place: bool) -> Row:
    """``rope(x, out=out)`` (or in place) against ``np.copyto(out, x)``."""
    rope = RoPE(shape[0], shape[1])
    x = _make(shape, dtype, order)
    target = x.copy(order="K") if in_place else np.empty_like(x)
    source = target if in_place else x
    contenders: dict[str, Callable[[], object]] = {
        "copyto": lambda: np.copyto(target, x),
        "ours": lambda: rope(source, out=target),
        "numpy": lambda: _rope_numpy(rope)(x),
    }
    times = interleaved_medians(contenders, repeat)
    name = "rope(x, out=x)" if in_place else "rope(x, out=out)"
    return _row(name, shape, order, x, times, "np.copyto", "copyto")


def decode(repeat: int, with_out: bool) -> Row:
    """One token of decoding, (128, 1, 32) float32: microseconds per call."""
    rope = RoPE(128, 4096)
    x = _make((128, 1, 32), np.float32, "C")
    out = np.empty_like(x)
    ours: Callable[[], object] = (lambda: rope(x, out=out)) if with_out else (lambda: rope(x))
    contenders: dict[str, Callable[[], object]] = {
        "copy": lambda: x.copy(),
        "ours": ours,
        "numpy": lambda: _rope_numpy(rope)(x),
    }
    torch_call = _rope_torch(rope, x)
    if torch_call is not None:
        contenders["torch"] = torch_call
    times = interleaved_medians(contenders, repeat, inner=2000)
    name = "decode rope(x, out=out)" if with_out else "decode rope(x)"
    return _row(name, x.shape, "C", x, times, "x.copy()", "copy")


def absolute_forward(shape: tuple[int, ...], order: str, repeat: int) -> Row:
    """``pe(x)`` against ``x.copy()`` and the numpy formula."""
    pe = AbsolutePE(shape[1], shape[0])
    x = _make(shape, np.float32, order)
    table = pe.embeddings[:, : shape[0]].T[:, :, np.newaxis]
    contenders: dict[str, Callable[[], object]] = {
        "copy": lambda: x.copy(order="K"),
        "ours": lambda: pe(x),
        "numpy": lambda: x + table,
    }
    if torch is not None:
        tensor, embedded = torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(table))
        contenders["torch"] = lambda: tensor + embedded
    times = interleaved_medians(contenders, repeat)
    return _row("pe(x)", shape, order, x, times, "x.copy()", "copy")


def construction(name: str, build: Callable[[], object], repeat: int) -> Row:
    times = interleaved_medians({"ours": build}, repeat)
    return Row(name, "", "", "", times["ours"])


def cold_start(warm: bool) -> Row:
    """A fresh interpreter: import, RoPE(64, 128), one call; with or without Numba's cache."""
    code = (
        "import numpy as np; from positional_embeddings import RoPE; "
        "RoPE(64, 128)(np.ones((64, 128, 8), np.float32))"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as cache:
        if not warm:
            environment["NUMBA_CACHE_DIR"] = cache
        else:
            subprocess.run([sys.executable, "-c", code], env=environment, check=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=environment, check=True)
        seconds = time.perf_counter() - start
    return Row("cold start, " + ("warm cache" if warm else "empty cache"), "", "", "", seconds)


def _row(
    name: str,
    shape: tuple[int, ...],
    order: str,
    x: np.ndarray,
    times: dict[str, float],
    floor_name: str,
    floor_key: str,
) -> Row:
    ours = times["ours"]
    traffic = 2 * x.nbytes
    return Row(
        case=name,
        shape=_describe(shape),
        order=order,
        dtype=str(x.dtype),
        seconds=ours,
        gbps=traffic / ours / 1e9,
        vs_floor=ours / times[floor_key],
        floor=floor_name,
        vs_numpy=ours / times["numpy"],
        vs_torch=ours / times["torch"] if "torch" in times else None,
        extra={"floor_seconds": times[floor_key]},
    )


def all_cases(quick: bool, repeat: int) -> list[tuple[str, Callable[[], Row]]]:
    """(name, run) for every case; ``quick`` shrinks every shape for a smoke run."""

    def size(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(min(n, 16) for n in shape) if quick else shape

    sized = {
        shape: size(shape)
        for shape in [
            (128, 2048, 128),
            (128, 4096, 32),
            (64, 2048, 256),
            (64, 100, 256),
            (128, 512, 32),
            (100, 512, 32),
            (4096, 512, 16),
        ]
    }

    cases: list[tuple[str, Callable[[], Row]]] = []
    for shape, dtype in [
        ((128, 2048, 128), np.float32),
        ((128, 2048, 128), np.float64),
        ((128, 4096, 32), np.float32),
        ((64, 2048, 256), np.float32),
        ((64, 100, 256), np.float32),
    ]:
        for order in ("C", "F"):
            cases.append(
                ("rope", lambda s=sized[shape], d=dtype, o=order: rope_forward(s, d, o, repeat))
            )
    for order in ("C", "F"):
        big = size((128, 2048, 128))
        cases.append(("rope-out", lambda o=order, s=big: rope_out(s, np.float32, o, repeat, False)))
        cases.append(
            ("rope-inplace", lambda o=order, s=big: rope_out(s, np.float32, o, repeat, True))
        )
        cache_sized = size((128, 512, 32))
        cases.append(
            (
                "rope-in-cache",
                lambda o=order, s=cache_sized: rope_out(s, np.float32, o, repeat, False),
            )
        )
    cases.append(("decode", lambda: decode(repeat, False)))
    cases.append(("decode", lambda: decode(repeat, True)))
    for shape in [(100, 512, 32), (4096, 512, 16)]:
        for order in ("C", "F"):
            cases.append(("pe", lambda s=sized[shape], o=order: absolute_forward(s, o, repeat)))
    seq = 1024 if quick else 131072
    cases.append(
        ("tables", lambda: construction(f"RoPE(128, {seq})", lambda: RoPE(128, seq), repeat))
    )
    cases.append(
        (
            "tables",
            lambda: construction(
                f"AbsolutePE(512, {seq // 16})", lambda: AbsolutePE(512, seq // 16), repeat
            ),
        )
    )
    if not quick:
        cases.append(("cold-start", lambda: cold_start(True)))
        cases.append(("cold-start", lambda: cold_start(False)))
    return cases
