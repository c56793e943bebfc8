"""Timing in one process: interleaved repetitions, medians."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

__all__ = ["interleaved_medians"]


def interleaved_medians(
    contenders: dict[str, Callable[[], object]], repeat: int, inner: int = 1
) -> dict[str, float]:
    """Median seconds per call of each contender.

    Each repetition runs every contender once (``inner`` calls, averaged), in
    turn, so that a noisy moment of the machine hits them all alike.  One
    warm-up round first (compilation, page faults of reused buffers).
    """
    for function in contenders.values():
        function()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, function in contenders.items():
                start = time.perf_counter()
                for _ in range(inner):
                    function()
                samples[name].append((time.perf_counter() - start) / inner)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}
