"""Splitting large kernel calls over threads.

The kernels are serial Numba loops compiled with ``nogil=True``; a large call
is cut into contiguous ranges run at the same time by a small pool of Python
threads, the calling thread taking the first range.  Numba's own parallel
backends are not used: the default ``workqueue`` layer aborts the process
when two threads launch parallel kernels at once, and the others need extra
packages.  Plain threads over ``nogil`` code are safe to call from any number
of threads, survive ``fork`` (the child starts a new pool when it needs one),
and cost nothing below the size threshold, where everything runs serially in
the calling thread.

The number of threads is the number of CPUs this process may use, or the
environment variable ``POSITIONAL_EMBEDDINGS_NUM_THREADS`` read at import (1
turns threading off).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["MIN_BYTES_PER_THREAD", "run_ranges", "serial", "thread_count"]

MIN_BYTES_PER_THREAD = 6 << 20
"""Below this much memory traffic per thread, splitting does not pay.

Measured with ``python -m benchmarks --cases threads`` on the 2-CPU
development machine (a virtual machine), where handing a range to a
sleeping thread and waking the caller again cost about 170 µs in the first
runs (50-60 µs in later ones): a 4 MB ``rope(x, out=out)`` took 1.1-1.4x
longer split over two threads, an 8 MB one 0.7-0.92x, a 32 MB one
0.8-0.9x.  Splitting starts at 12 MiB of traffic (two threads' worth)."""

_pool: ThreadPoolExecutor | None = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _configured_threads() -> int:
    configured = os.environ.get("POSITIONAL_EMBEDDINGS_NUM_THREADS")
    if configured is not None:
        try:
            return max(1, int(configured))
        except ValueError:
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


_threads = _configured_threads()


def thread_count() -> int:
    """How many threads a large call may use (>= 1), fixed at import."""
    return _threads


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers < workers:
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="positional_embeddings")
            _pool_workers = workers
        return _pool


def _forget_pool() -> None:
    """In a forked child the parent's pool threads do not exist."""
    global _pool, _pool_workers, _pool_lock
    _pool = None
    _pool_workers = 0
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def serial(cost: int) -> bool:
    """Whether ``run_ranges`` runs a call of this cost in the calling thread alone."""
    return _threads == 1 or cost < 2 * MIN_BYTES_PER_THREAD


def run_ranges(kernel: Callable[..., None], length: int, cost: int, *args: Any) -> None:
    """Call ``kernel(*args, start, stop)`` over ranges that cover ``0 .. length`` once.

    One range, in the calling thread, unless the call costs at least
    ``MIN_BYTES_PER_THREAD`` (bytes of memory traffic, or their equivalent in
    time) per thread; then up to ``thread_count()`` ranges of near-equal size
    run concurrently.  Exceptions from any range are raised here after every
    range has finished.
    """
    threads = 1 if serial(cost) else min(_threads, length, cost // MIN_BYTES_PER_THREAD)
    if threads <= 1:
        kernel(*args, 0, length)
        return
    bounds = [length * i // threads for i in range(threads + 1)]
    pool = _executor(threads - 1)
    futures: list[Future[None]] = [
        pool.submit(kernel, *args, bounds[i], bounds[i + 1]) for i in range(1, threads)
    ]
    try:
        kernel(*args, bounds[0], bounds[1])
    finally:
        for future in futures:
            future.exception()
    for future in futures:
        future.result()
