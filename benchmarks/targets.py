"""The project's performance targets, checked against the rows of a full-size run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .cases import OTHER_ORDER, SUCCESSIVE_SLOTS, Row

__all__ = ["JULIA_SECONDS", "TARGETS", "Outcome", "Target", "check_targets", "describe"]

JULIA_SECONDS = {
    "rope(x) 128×2048×128 float32": 264e-3,
    "decode rope(x) 128×1×32 float32": 19e-6,
    "pe(x) 4096×512×16 float32": 140e-3,
}
"""PositionalEmbeddings.jl's own times (Julia 1.10.5), as the issue gives them: measured
on the Intel AVX-512 development machine it was filed on, and judged against on every
machine (no Julia runs on the others)."""


@dataclass(frozen=True)
class Target:
    """One target: which rows it judges and how.

    Attributes
    ----------
    name : str
        The target as the project states it.
    applies : callable
        Whether a row is judged by this target.
    judge : callable
        A row to (what was measured, as text; whether the target is met).
    """

    name: str
    applies: Callable[[Row], bool]
    judge: Callable[[Row], tuple[str, bool]]


@dataclass(frozen=True)
class Outcome:
    """A target's verdict on one row."""

    target: str
    row: str
    measured: str
    met: bool


def _shape(row: Row) -> str:
    return "×".join(map(str, row.shape))


def describe(row: Row) -> str:
    """The row as ``case shape order dtype`` (empty fields left out)."""
    return " ".join(part for part in (row.case, _shape(row), row.order, row.dtype) if part)


_BEYOND_CACHES = 64 << 20
"""Input bytes from which a row counts as "well beyond the caches" for the
copy-floor targets: twice the 32 MiB last-level cache of the AMD EPYC
development machines (the issue's examples are 128 MB; the 64 MiB LLaMA-like
(128, 4096, 32) float32 is in; the Intel machine it was filed on reports
480 MiB of L3, shared with its host).  The table's machine line names
the cache of the machine it was measured on.  Smaller rows (the Julia docs'
6.5 MB shapes) are in the table, judged by no target: their floor is a copy
within the cache."""


def _beyond_caches(row: Row, groups: tuple[str, ...]) -> bool:
    return row.group in groups and row.bytes_moved // 2 >= _BEYOND_CACHES


def _decoding_step(row: Row) -> bool:
    """Whether the 2 us target judges ``row``: a RoPE step on (128, 1, 32),
    allocating or written into memory in cache.  The steps into successive
    slots of a 64 MiB cache are in the table to show what a decoding loop
    pays, judged by no target: their slots' lines come from memory, and
    ``np.copyto`` into them alone took about 1.5 us (Julia's order) and
    2.3-2.4 us (C order) as the benchmark times it, on the AVX-512 AMD EPYC
    development machine.  Nor are the steps in the other memory order than
    their cache, which move every element across the layout (``np.copyto``
    alone: 1.1-1.2 us)."""
    return (
        row.case.startswith("decode rope")
        and row.shape == (128, 1, 32)
        and SUCCESSIVE_SLOTS not in row.case
        and OTHER_ORDER not in row.case
    )


def _ratio_at_most(limit: float) -> Callable[[Row], tuple[str, bool]]:
    def judge(row: Row) -> tuple[str, bool]:
        ratio = row.vs_floor if row.vs_floor is not None else float("inf")
        return f"{ratio:.2f}×", ratio <= limit

    return judge


def _throughput_at_least(factor: float) -> Callable[[Row], tuple[str, bool]]:
    def judge(row: Row) -> tuple[str, bool]:
        speed = 1 / row.vs_floor if row.vs_floor else 0.0
        floor_gbps = row.bytes_moved / row.floor_seconds / 1e9 if row.floor_seconds else 0.0
        return f"{row.gbps or 0:.1f} GB/s vs {floor_gbps:.1f} GB/s ({speed:.2f}×)", speed >= factor

    return judge


def _seconds_at_most(limit: float) -> Callable[[Row], tuple[str, bool]]:
    def judge(row: Row) -> tuple[str, bool]:
        seconds = row.seconds
        text = f"{seconds * 1e6:.2f} µs" if limit < 1e-3 else f"{seconds * 1e3:.1f} ms"
        return text, seconds <= limit

    return judge


def _ten_times_julia(row: Row) -> tuple[str, bool]:
    julia = JULIA_SECONDS[f"{row.case} {_shape(row)} {row.dtype}"]
    unit, scale = ("µs", 1e6) if julia < 1e-3 else ("ms", 1e3)
    text = f"{julia / row.seconds:.2f}× faster than Julia's {julia * scale:.0f} {unit}"
    return text, row.seconds * 10 <= julia


TARGETS = (
    Target(
        "allocating rope/pe beyond the caches ≤ 1.15× x.copy()",
        lambda row: _beyond_caches(row, ("rope", "pe")),
        _ratio_at_most(1.15),
    ),
    Target(
        "out= beyond the caches ≤ 1.15× np.copyto",
        lambda row: _beyond_caches(row, ("rope-out", "pe-out")),
        _ratio_at_most(1.15),
    ),
    Target(
        "in place ≤ 1.10× np.copyto",
        lambda row: row.group == "rope-inplace",
        _ratio_at_most(1.10),
    ),
    Target(
        "in-cache out= ≥ 1.3× np.copyto throughput",
        lambda row: row.group == "rope-in-cache",
        _throughput_at_least(1.3),
    ),
    Target(
        "RoPE decode ≤ 2 µs",
        _decoding_step,
        _seconds_at_most(2e-6),
    ),
    Target(
        "RoPE(128, 131072) ≤ 100 ms",
        lambda row: row.case == "RoPE(128, 131072)",
        _seconds_at_most(0.1),
    ),
    Target(
        "cold start, warm cache ≤ 1.0 s",
        lambda row: row.case == "cold start, warm cache",
        _seconds_at_most(1.0),
    ),
    Target(
        "≥ 10× faster than PositionalEmbeddings.jl (the issue's times)",
        lambda row: f"{row.case} {_shape(row)} {row.dtype}" in JULIA_SECONDS,
        _ten_times_julia,
    ),
)
"""Every target, in the order the report lists them."""


def check_targets(rows: Iterable[Row]) -> list[Outcome]:
    """Every target's verdict on every row it applies to, target by target."""
    rows = list(rows)
    return [
        Outcome(target.name, describe(row), *target.judge(row))
        for target in TARGETS
        for row in rows
        if target.applies(row)
    ]
