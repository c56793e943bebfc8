"""Timing in one process: interleaved repetitions, medians."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping

__all__ = ["interleaved_medians"]

_SETTLING = 8
"""A sample of ``n`` back-to-back calls follows ``n // _SETTLING`` untimed
ones of the same contender: each is timed in its own steady state, not
paying to refill the caches that the contender before it emptied.  On the
AMD EPYC development machine, after the numpy formula's temporaries, an 8 MB
``np.copyto`` or ``rope(x, out=out)`` took 5-6 calls (about 1 ms) to come
back to its speed in cache; with three contenders in rotation, the package's
call came after the numpy formula in two samples of three and ``np.copyto``
in one, and that alone made it look 1.1-1.4x slower than it is."""


def _calls_per_sample(function: Callable[[], object], sample_seconds: float) -> int:
    """How many back-to-back calls of ``function`` fill ``sample_seconds``:
    counted by calling it until they do (at most 100,000), so that one slow
    call (the first after other work, say) does not size every sample."""
    deadline = time.perf_counter() + sample_seconds
    calls = 0
    while calls < 100_000:
        function()
        calls += 1
        if time.perf_counter() >= deadline:
            break
    return calls


def interleaved_medians(
    contenders: Mapping[str, Callable[[], object]],
    repeat: int,
    *,
    sample_seconds: float = 0.0,
    warmup: bool = True,
) -> dict[str, float]:
    """Median seconds per call of each contender, measured in turn.

    Each repetition runs every contender once, one after the other, so that
    a noisy moment of the machine hits them all alike; the order rotates
    from one repetition to the next, so that no contender always follows the
    same one (whose cache or memory traffic it would inherit).

    Parameters
    ----------
    contenders : mapping of str to callable
        Name to a function of no arguments; its result is dropped.
    repeat : int
        Number of repetitions (samples per contender, >= 1).
    sample_seconds : float, default 0.0
        A sample of a contender faster than this is the mean of as many
        back-to-back calls as fill it (counted once, before the first
        sample), after an eighth as many untimed ones; 0 for one call per
        sample.
    warmup : bool, default True
        Call every contender once, untimed, before anything else
        (compilation, page faults of reused buffers, a cache to fill).

    Returns
    -------
    dict of str to float
        Median seconds per call, by contender name.
    """
    if warmup:
        for function in contenders.values():
            function()
    inner = {
        name: _calls_per_sample(function, sample_seconds) if sample_seconds > 0 else 1
        for name, function in contenders.items()
    }
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for repetition in range(repeat):
            turn = repetition % len(names)
            for name in names[turn:] + names[:turn]:
                function, calls = contenders[name], inner[name]
                for _ in range(calls // _SETTLING):
                    function()
                start = time.perf_counter()
                for _ in range(calls):
                    function()
                samples[name].append((time.perf_counter() - start) / calls)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}
