"""Splitting large kernel calls over threads.

The kernels are serial Numba loops compiled with ``nogil=True``; a large call
is cut into contiguous ranges run at the same time by a team of Python
threads, the calling thread taking the first range.  Numba's own parallel
backends are not used: the default ``workqueue`` layer aborts the process
when two threads launch parallel kernels at once, and the others need extra
packages.  Below the size threshold everything runs serially in the calling
thread, and costs nothing more.

Handing a range to a sleeping thread costs what waking it costs.  On the
development machines, virtual machines whose idle CPUs halt, waking a
thread on the other CPU takes 30-100 µs, and a thread that finds the GIL
held sleeps until woken.  With a thread pool, a call paid two such wakes
(the pool thread's, and the caller's own when the pool thread was done)
and often a third for the GIL: traced on an 8 MB copy split in two, 406 µs
back to back where each half takes 280 µs.  The team hands ranges over
without anyone sleeping on the way (296 µs in the same trace):

- The caller posts the ranges from inside its own kernel, after Numba
  released the GIL there (every kernel's first statement is
  ``posted(post)``), so that a team thread taking the GIL to start its
  range never finds it held.  A kernel that posts nothing (a plain Python
  function, or one that raised first) is posted after it returns.
- A team thread marks its range done from compiled code, and the caller
  waits for it spinning in compiled code, the GIL released: the caller's
  return to Python never waits for a GIL that the team holds.

Spinning takes a CPU that the rest of the program may want (numpy's
threaded matrix products between two calls), so it is bounded:

- A team thread spins for the next range for ``SPIN_SECONDS`` at most, and
  only if the call came within as long of the one before (calls back to
  back); otherwise it sleeps at once, and the next call wakes it as it
  starts its own range.
- The caller spins ``_WAIT_SECONDS`` at most, and not at all if a team
  thread has not started its range yet (it may be waiting for the
  caller's CPU); then it sleeps until the last team thread wakes it.
- Whoever may find the other asleep wakes it: a thread about to sleep
  marks itself so and then looks once more for what it waits for, the
  other stores what it was waiting for and then looks for the mark (atomic,
  ordered accesses, ``_atomics``), so one of the two always sees the other.

One call uses the team at a time; a call that finds it busy runs serially
in its own thread.  After ``fork`` the child starts a new team when it
needs one.

The number of threads is the number of CPUs this process may use, or the
environment variable ``POSITIONAL_EMBEDDINGS_NUM_THREADS`` (1 turns threading
off); ``POSITIONAL_EMBEDDINGS_SPIN_US`` sets ``SPIN_SECONDS`` in
microseconds (0: the team never spins between calls).  Both are read at
import.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from ._atomics import load, relax, store
from ._jit import JIT, JIT_INLINED

__all__ = [
    "MIN_BYTES_PER_THREAD",
    "NO_POST",
    "SPIN_SECONDS",
    "posted",
    "run_ranges",
    "serial",
    "thread_count",
]

MIN_BYTES_PER_THREAD = 4 << 20
"""Below this much memory traffic per thread, splitting does not pay.

Measured on the 2-CPU development machine (a virtual machine; ``python -m
benchmarks --cases threads`` and calls 5 ms apart), ``rope(x, out=out)``
float32 in C order on two threads against one: back to back, 512 KB took
1.2-1.4x the time, 1 MB 0.4-0.6x, 2 MB 0.5x, 4 MB 0.56x; 5 ms apart, where
every call wakes the team, 2 MB took 0.97-1.01x and 4 MB 0.95-1.0x.
Splitting starts at 8 MiB of traffic (two threads' worth): a 4 MB call
with ``out=``.  Before the team handed ranges over without sleeping
(``_Team``), it started at 12 MiB: 4 MB then took 1.1-1.55x longer on two
threads."""


def _configured(name: str, default: int, least: int) -> int:
    configured = os.environ.get(name)
    if configured is not None:
        try:
            return max(least, int(configured))
        except ValueError:
            pass
    return default


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


_threads = _configured("POSITIONAL_EMBEDDINGS_NUM_THREADS", _usable_cpus(), 1)

SPIN_SECONDS = _configured("POSITIONAL_EMBEDDINGS_SPIN_US", 100, 0) * 1e-6
"""How long a team thread that finished its range spins for the next one,
if the call came within as long of the one before (back-to-back calls);
otherwise it sleeps at once, and leaves its CPU to whatever the program
does next (a spinning thread slowed numpy's matrix products that followed
a call by up to 2x)."""

_WAIT_SECONDS = 1e-4
"""How long a caller that finished its own range spins for the team's
before it sleeps until the last of them wakes it (a team thread held off
its CPU, by the caller's spinning among others, then gets it), and how
long a woken team thread spins for the post of the call that woke it."""

NO_POST = np.zeros(1, np.int64)
"""The ``post`` of a kernel call that hands nothing to the team: a serial
call, or a team thread's own range."""

_LINE = 8
"""int64 words per cache line: each thread's flags have a line of their
own."""


def thread_count() -> int:
    """How many threads a large call may use (>= 1), fixed at import."""
    return _threads


def serial(cost: int) -> bool:
    """Whether ``run_ranges`` runs a call of this cost in the calling thread alone."""
    return _threads == 1 or cost < 2 * MIN_BYTES_PER_THREAD


@numba.njit(**JIT_INLINED)
def posted(post):  # type: ignore[no-untyped-def]
    """Hand their ranges to the team threads ``1 .. len(post) - 1``: store
    the call's generation ``post[0]`` into their posted words, which
    ``post`` views.  The first statement of every kernel that ``run_ranges``
    splits; ``NO_POST`` posts nothing."""
    for k in range(1, post.shape[0]):
        store(post, k, post[0])


@numba.njit(**JIT)
def _next_range(posted, asleep, k, seen, spins):  # type: ignore[no-untyped-def]
    """Team thread ``k`` waits for a generation other than ``seen`` in its
    posted word and returns it; after ``spins`` turns without one, it marks
    itself asleep and returns 0, unless a post came meanwhile."""
    store(asleep, k * _LINE, 0)
    for _ in range(spins):
        generation = load(posted, k)
        if generation != seen:
            return generation
        relax()
    store(asleep, k * _LINE, 1)
    generation = load(posted, k)
    if generation != seen:
        store(asleep, k * _LINE, 0)
        return generation
    return 0


@numba.njit(**JIT)
def _done_then_next(posted, done, asleep, waiting, k, generation, spins):  # type: ignore[no-untyped-def]
    """Team thread ``k`` marks ``generation`` done, then returns -1 if the
    caller sleeps (to be woken), else waits for the next range
    (``_next_range``): in one compiled call, so that it holds no GIL when
    the caller, seeing its range done, returns to Python."""
    store(done, k * _LINE, generation)
    if load(waiting, 0):
        return -1
    return _next_range(posted, asleep, k, generation, spins)


@numba.njit(**JIT)
def _await_team(done, asleep, started, waiting, generation, count, spins):  # type: ignore[no-untyped-def]
    """The caller waits for team threads ``1 .. count`` to finish
    ``generation``: 0 when they have; ``k`` as soon as unfinished thread
    ``k`` is asleep (to be woken); -1, with the caller marked waiting (to
    sleep until a team thread wakes it), after ``spins`` turns, or at once
    if a thread has not started its range: it may be waiting for this very
    CPU."""
    store(waiting, 0, 0)
    turn = 0
    while True:
        finished, starting = True, False
        for k in range(1, count + 1):
            if load(done, k * _LINE) != generation:
                if load(asleep, k * _LINE):
                    store(waiting, 0, 0)
                    return k
                starting |= load(started, k * _LINE) != generation
                finished = False
        if finished:
            store(waiting, 0, 0)
            return 0
        if load(waiting, 0):  # unfinished after marking itself waiting
            return -1
        if starting or turn >= spins:
            store(waiting, 0, 1)
        else:
            turn += 1
            relax()


def _spins_per_second() -> float:
    """Turns of the team's spinning loops per second on this machine (the
    spin-wait hint alone takes from a few to over a hundred cycles)."""
    flags = np.zeros(2 * _LINE, np.int64)
    spins = 1000
    _next_range(flags, flags[_LINE:], 0, 0, 1)  # compiled before it is timed
    while True:
        start = time.perf_counter()
        _next_range(flags, flags[_LINE:], 0, 0, spins)
        elapsed = time.perf_counter() - start
        if elapsed > 2e-4:
            return spins / elapsed
        spins *= 4


class _Team:
    """Threads ``1 .. workers`` that run the ranges of split calls (the
    caller is thread 0), and their flags."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.lock = threading.Lock()
        self.generation = 0
        rate = _spins_per_second()
        self.spins, self.wait_spins = round(SPIN_SECONDS * rate), round(_WAIT_SECONDS * rate)
        self.idle_spins = 0
        self.last_end = -SPIN_SECONDS
        self.posted = np.zeros(workers + 1, np.int64)
        self.done = np.zeros((workers + 1) * _LINE, np.int64)
        self.asleep = np.zeros((workers + 1) * _LINE, np.int64)
        self.started = np.zeros((workers + 1) * _LINE, np.int64)
        self.waiting = np.zeros(_LINE, np.int64)
        self.finished = threading.Event()
        self.wakes = [threading.Event() for _ in range(workers + 1)]
        self.jobs: list[Any] = [None] * (workers + 1)  # (kernel, args, start, stop) once posted
        self.errors: list[BaseException | None] = [None] * (workers + 1)
        for k in range(1, workers + 1):
            threading.Thread(
                target=self._work, args=(k,), name=f"positional_embeddings-{k}", daemon=True
            ).start()

    def _work(self, k: int) -> None:
        seen = 0  # started, or woken, by a call: its post is coming
        generation = _next_range(self.posted, self.asleep, k, seen, self.wait_spins)
        while True:
            if generation == 0:
                self.wakes[k].wait()
                self.wakes[k].clear()
                generation = _next_range(self.posted, self.asleep, k, seen, self.wait_spins)
                continue
            kernel, args, start, stop = self.jobs[k]
            self.started[k * _LINE] = generation  # a hint for the caller's wait, not a flag
            try:
                kernel(*args, start, stop, NO_POST)
            except BaseException as error:  # raised in the caller's thread
                self.errors[k] = error
            seen = generation
            generation = _done_then_next(
                self.posted, self.done, self.asleep, self.waiting, k, seen, self.idle_spins
            )
            if generation < 0:
                self.finished.set()
                generation = _next_range(self.posted, self.asleep, k, seen, self.idle_spins)

    def _wake(self, k: int) -> None:
        self.asleep[k * _LINE] = 0
        self.wakes[k].set()

    def run(self, kernel: Callable[..., None], bounds: list[int], args: tuple[Any, ...]) -> None:
        """``kernel(*args, start, stop, post)`` over consecutive ``bounds``,
        the first range in this thread, the others in threads ``1 ..``."""
        count = len(bounds) - 2
        self.generation += 1
        back_to_back = time.perf_counter() - self.last_end <= SPIN_SECONDS
        self.idle_spins = self.spins if back_to_back else 0
        for k in range(1, count + 1):
            self.jobs[k] = (kernel, args, bounds[k], bounds[k + 1])
            self.errors[k] = None
            if self.asleep[k * _LINE]:
                self._wake(k)
        post = self.posted[: count + 1]
        post[0] = self.generation
        try:
            kernel(*args, bounds[0], bounds[1], post)
        finally:
            if post[count] != self.generation:
                posted(post)
            self._await(count)
            self.jobs[1 : count + 1] = [None] * count
            self.last_end = time.perf_counter()
        for error in self.errors[1 : count + 1]:
            if error is not None:
                raise error

    def _await(self, count: int) -> None:
        flags = self.done, self.asleep, self.started, self.waiting
        while (waiting := _await_team(*flags, self.generation, count, self.wait_spins)) != 0:
            if waiting > 0:
                self._wake(waiting)
            else:
                self.finished.wait()
                self.finished.clear()


_team: _Team | None = None
_team_lock = threading.Lock()


def _free_team(workers: int) -> _Team | None:
    """The team with at least ``workers`` threads, locked for this call, or
    None if another call is using it."""
    global _team
    with _team_lock:
        if _team is None or _team.workers < workers:
            _team = _Team(max(workers, _threads - 1))
        team = _team
    return team if team.lock.acquire(blocking=False) else None


def _forget_team() -> None:
    """In a forked child the parent's team threads do not exist."""
    global _team, _team_lock
    _team = None
    _team_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_team)


def run_ranges(kernel: Callable[..., None], length: int, cost: int, *args: Any) -> None:
    """Call ``kernel(*args, start, stop, post)`` over ranges that cover ``0 .. length`` once.

    One range, in the calling thread, unless the call costs at least
    ``MIN_BYTES_PER_THREAD`` (bytes of memory traffic, or their equivalent in
    time) per thread; then up to ``thread_count()`` ranges of near-equal size
    run concurrently.  ``kernel`` starts with ``posted(post)``.  Exceptions
    from any range are raised here after every range has finished.
    """
    threads = 1 if serial(cost) else min(_threads, length, cost // MIN_BYTES_PER_THREAD)
    team = _free_team(threads - 1) if threads > 1 else None
    if team is None:
        kernel(*args, 0, length, NO_POST)
        return
    try:
        team.run(kernel, [length * i // threads for i in range(threads + 1)], args)
    finally:
        team.lock.release()
