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
  back), or came alone as the last call that came alone did, and that one
  had the next right after it (a query rotated after other work, then its
  key); otherwise it sleeps at once, and the next call wakes it as it
  starts its own range.
- The caller spins ``_WAIT_SECONDS`` at most for ranges that team threads
  have started; then it sleeps until the last of them wakes it.
- Whoever may find the other asleep wakes it: a thread about to sleep
  marks itself so and then looks once more for what it waits for, the
  other stores what it was waiting for and then looks for the mark (atomic,
  ordered accesses, ``_atomics``), so one of the two always sees the other.

No call waits for a thread that has not started: a range is run by
whoever claims it first (an atomic compare-exchange), and the caller, done
with its own range, claims and runs those no team thread has claimed yet
(the thread is asleep, or has no CPU).  A team thread that comes late
passes over them.  Where a thread wakes, and where a late one runs, is
steered on Linux (``_Steering``).

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

import ctypes
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from ._atomics import compare_exchange, load, relax, store
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
1.2x the time, 1 MB 0.55-0.65x, 2 MB 0.4-0.45x, 4 MB 0.5-0.57x; 5 ms apart,
where every call wakes the team (30 µs of the caller's time: moving the
thread off its CPU, and the wake), 1 MB took 2.1-2.3x, 2 MB 1.2-1.26x and
4 MB 0.81-0.88x.  Splitting starts at 8 MiB of traffic (two threads'
worth): a 4 MB call with ``out=``.  Before the team handed ranges over
without sleeping (``_Team``), it started at 12 MiB: 4 MB then took
1.1-1.55x longer on two threads; before woken threads were kept off the
caller's CPU (``_Steering``), 4 MB 5 ms apart took 0.95-1.0x."""


def _configured(name: str, default: int, least: int, most: int) -> int:
    """The integer environment variable ``name``, within ``least`` and
    ``most``: ``default`` where it is unset; where it is not an integer, or
    beyond those bounds, ``default`` or the nearest bound, with a
    ``RuntimeWarning`` that says so (a typo would otherwise pass unseen)."""
    configured = os.environ.get(name)
    if configured is None:
        return default
    try:
        value = int(configured)
    except ValueError:
        warnings.warn(
            f"{name}={configured!r} is not an integer; using {default}",
            RuntimeWarning,
            stacklevel=2,
        )
        return default
    if not least <= value <= most:
        bound = least if value < least else most
        warnings.warn(
            f"{name}={value} is outside {least}..{most}; using {bound}",
            RuntimeWarning,
            stacklevel=2,
        )
        return bound
    return value


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


_MOST_THREADS = 1024
"""The most threads ``POSITIONAL_EMBEDDINGS_NUM_THREADS`` may ask for."""

_MOST_SPIN_US = 1_000_000
"""The longest spin ``POSITIONAL_EMBEDDINGS_SPIN_US`` may ask for (a second;
a spin counted beyond int64, from about 1e17 us, stopped the team thread
with an error, and the call then waited for it forever)."""

_threads = _configured("POSITIONAL_EMBEDDINGS_NUM_THREADS", _usable_cpus(), 1, _MOST_THREADS)

SPIN_SECONDS = _configured("POSITIONAL_EMBEDDINGS_SPIN_US", 100, 0, _MOST_SPIN_US) * 1e-6
"""How long a team thread that finished its range spins for the next one,
if the call came within as long of the one before (back-to-back calls), or
came long after it as the last such call did, and that one had the next
right after it (a query rotated after other work, then its key); otherwise
it sleeps at once, and leaves its CPU to whatever the program does next (a
spinning thread slowed numpy's matrix products that followed a call by up
to 2x)."""

_WAIT_SECONDS = 1e-4
"""How long a caller that finished its own range spins for the ranges team
threads run before it sleeps until the last of them wakes it (a team
thread held off its CPU, by the caller's spinning among others, then gets
it), and how long a woken team thread spins for the post of the call that
woke it."""

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


@numba.njit(**JIT_INLINED)
def _claimed(claims, k, generation):  # type: ignore[no-untyped-def]
    """Whether this thread, a team thread or the caller, is the first to
    claim range ``k`` of call ``generation`` (and so runs it).  The claimed
    word only moves forward: a generation read before a later call claimed
    its range (a team thread held off its CPU meanwhile) is never claimed,
    and no other call's range is run in its name."""
    seen = load(claims, k * _LINE)
    while seen < generation:
        replaced = compare_exchange(claims, k * _LINE, seen, generation)
        if replaced == seen:
            return True
        seen = replaced
    return False


@numba.njit(**JIT)
def _next_range(posted, claims, asleep, k, spins):  # type: ignore[no-untyped-def]
    """Team thread ``k`` waits for a generation in its posted word whose
    range it claims, and returns it (a range the caller claimed first, to
    run it itself, is passed over); after ``spins`` turns without one, it
    marks itself asleep and returns 0, unless one came meanwhile."""
    store(asleep, k * _LINE, 0)
    for _ in range(spins):
        generation = load(posted, k)
        if _claimed(claims, k, generation):
            return generation
        relax()
    store(asleep, k * _LINE, 1)
    generation = load(posted, k)
    if _claimed(claims, k, generation):
        store(asleep, k * _LINE, 0)
        return generation
    return 0


@numba.njit(**JIT)
def _done_then_next(posted, claims, done, asleep, waiting, k, generation, spins):  # type: ignore[no-untyped-def]
    """Team thread ``k`` marks ``generation`` done, then returns -1 if the
    caller sleeps (to be woken), else waits for the next range
    (``_next_range``): in one compiled call, so that it holds no GIL when
    the caller, seeing its range done, returns to Python."""
    store(done, k * _LINE, generation)
    if load(waiting, 0):
        return -1
    return _next_range(posted, claims, asleep, k, spins)


@numba.njit(**JIT)
def _await_team(done, claims, waiting, generation, count, spins):  # type: ignore[no-untyped-def]
    """The caller waits for ranges ``1 .. count`` of ``generation``: 0 when
    they are done; ``k`` as soon as it claims range ``k``, which no team
    thread has started (its thread is asleep, or waits for a CPU), to run
    it itself; -1, with the caller marked waiting (to sleep until a team
    thread wakes it), after ``spins`` turns."""
    store(waiting, 0, 0)
    turn = 0
    while True:
        finished = True
        for k in range(1, count + 1):
            if load(done, k * _LINE) != generation:
                if _claimed(claims, k, generation):
                    store(waiting, 0, 0)
                    return k
                finished = False
        if finished:
            store(waiting, 0, 0)
            return 0
        if load(waiting, 0):  # unfinished after marking itself waiting
            return -1
        if turn >= spins:
            store(waiting, 0, 1)
        else:
            turn += 1
            relax()


def _spins_per_second() -> float:
    """Turns of the team's spinning loops per second on this machine (the
    spin-wait hint alone takes from a few to over a hundred cycles)."""
    flags = np.zeros(3 * _LINE, np.int64)
    spins = 1000
    arguments = (flags, flags[_LINE:], flags[2 * _LINE :], 0)
    _next_range(*arguments, 1)  # compiled before it is timed
    while True:
        start = time.perf_counter()
        _next_range(*arguments, spins)
        elapsed = time.perf_counter() - start
        if elapsed > 2e-4:
            return spins / elapsed
        spins *= 4


class _Team:
    """Threads ``1 .. workers`` that run the ranges of split calls (the
    caller is thread 0), and their flags.

    Where the system refuses a thread (a thread limit; a tight ``ulimit
    -v``, which thread stacks fill), the team warns and stops those it has
    started, and large calls run serially: kept, they still filled what the
    limit allowed, and the next array or compilation failed for want of it.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.lock = threading.Lock()
        self.generation = 0
        rate = _spins_per_second()
        self.spins, self.wait_spins = round(SPIN_SECONDS * rate), round(_WAIT_SECONDS * rate)
        self.idle_spins = 0
        self.last_end = -SPIN_SECONDS
        self.came_alone = False  # the last call came long after the one before it
        self.alone_then_followed = False  # the last such call had one right after it
        self.posted = np.zeros(workers + 1, np.int64)
        self.claims = np.zeros((workers + 1) * _LINE, np.int64)
        self.done = np.zeros((workers + 1) * _LINE, np.int64)
        self.asleep = np.zeros((workers + 1) * _LINE, np.int64)
        self.waiting = np.zeros(_LINE, np.int64)
        self.finished = threading.Event()
        self.wakes = [threading.Event() for _ in range(workers + 1)]
        self.jobs: list[Any] = [None] * (workers + 1)  # (kernel, args, start, stop) once posted
        self.errors: list[BaseException | None] = [None] * (workers + 1)
        self.steering = _Steering(workers)
        self.stopped = False
        threads: list[threading.Thread] = []
        try:
            for k in range(1, workers + 1):
                thread = threading.Thread(
                    target=self._work, args=(k,), name=f"positional_embeddings-{k}", daemon=True
                )
                thread.start()
                threads.append(thread)
        except RuntimeError as error:
            self._stop(threads)
            warnings.warn(
                f"positional_embeddings could not start thread {len(threads) + 1} of {workers}"
                f" ({error}): large calls run serially; POSITIONAL_EMBEDDINGS_NUM_THREADS"
                " asks for fewer threads",
                RuntimeWarning,
                stacklevel=2,
            )

    def _stop(self, threads: list[threading.Thread]) -> None:
        """End the team's ``threads`` (no call has used them yet)."""
        self.stopped = True
        for k in range(1, len(threads) + 1):
            self.wakes[k].set()
        for thread in threads:
            thread.join()

    def _work(self, k: int) -> None:
        self.steering.started(k)
        generation = _next_range(self.posted, self.claims, self.asleep, k, self.wait_spins)
        while True:
            if generation == 0:
                self.wakes[k].wait()
                self.wakes[k].clear()
                if self.stopped:
                    return
                self.steering.release(k)
                generation = _next_range(self.posted, self.claims, self.asleep, k, self.wait_spins)
                continue
            self._run(k)
            generation = _done_then_next(
                self.posted,
                self.claims,
                self.done,
                self.asleep,
                self.waiting,
                k,
                generation,
                self.idle_spins,
            )
            if generation < 0:
                self.finished.set()
                self.steering.release(k)  # a caller pulls only threads it then waits for
                generation = _next_range(self.posted, self.claims, self.asleep, k, self.idle_spins)

    def _run(self, k: int) -> None:
        """Run range ``k`` of the current call, claimed by this thread;
        an exception is kept to be raised in the caller's thread."""
        kernel, args, start, stop = self.jobs[k]
        try:
            kernel(*args, start, stop, NO_POST)
        except BaseException as error:
            self.errors[k] = error

    def run(self, kernel: Callable[..., None], bounds: list[int], args: tuple[Any, ...]) -> None:
        """``kernel(*args, start, stop, post)`` over consecutive ``bounds``,
        the first range in this thread, the others in threads ``1 ..``
        (or in this one, for those no team thread has started when it is
        done with its own)."""
        count = len(bounds) - 2
        self.generation += 1
        back_to_back = time.perf_counter() - self.last_end <= SPIN_SECONDS
        if self.came_alone:
            self.alone_then_followed = back_to_back
        self.came_alone = not back_to_back
        self.idle_spins = self.spins if back_to_back or self.alone_then_followed else 0
        for k in range(1, count + 1):
            self.jobs[k] = (kernel, args, bounds[k], bounds[k + 1])
            self.errors[k] = None
            if self.asleep[k * _LINE]:
                self.steering.wake_off(k, _current_cpu())
                self.asleep[k * _LINE] = 0
                self.wakes[k].set()
        post = self.posted[: count + 1]
        post[0] = self.generation
        try:
            kernel(*args, bounds[0], bounds[1], post)
        finally:
            self._settle(post, count)
        for error in self.errors[1 : count + 1]:
            if error is not None:
                raise error

    def _settle(self, post: np.ndarray, count: int) -> None:
        """After the caller's own range: post the ranges its kernel did not
        (it raised first), wait until every range is done, and clear the
        call.  An interruption meanwhile (a ``KeyboardInterrupt`` in the
        wait, a ``SystemExit`` from a signal handler) is raised after that:
        no thread writes the call's arrays once it has returned or raised.
        Raised at once, it left the team threads writing ``out`` after the
        caller had it back.  (An ``Exception`` from the wait itself would
        come again: it is raised at once.)"""
        interruption: BaseException | None = None
        while True:
            try:
                if post[count] != self.generation:
                    posted(post)
                self._await(count)
                break
            except Exception:
                raise
            except BaseException as error:
                interruption = interruption or error
        self.jobs[1 : count + 1] = [None] * count
        self.last_end = time.perf_counter()
        if interruption is not None:
            raise interruption

    def _await(self, count: int) -> None:
        flags = self.done, self.claims, self.waiting
        while (claimed := _await_team(*flags, self.generation, count, self.wait_spins)) != 0:
            if claimed > 0:
                self._run(claimed)
                self.done[claimed * _LINE] = self.generation
            else:
                cpu = _current_cpu()
                late = [k for k in range(1, count + 1) if self.done[k * _LINE] != self.generation]
                for k in late:
                    self.steering.pull(k, cpu)
                for k in late:
                    if self.done[k * _LINE] == self.generation:  # released before the pull
                        self.steering.release(k)
                self.finished.wait()
                self.finished.clear()


class _Steering:
    """Which CPUs a team thread may run on, where the system needs telling
    (Linux; elsewhere the system alone decides).

    - **Woken off the caller's CPU.** A virtual machine's idle CPU halts,
      and Linux then counts it as taken (its virtual CPU is not running): a
      thread woken while the other CPU idles is queued on the waker's own
      CPU, which the caller keeps busy with its range.  On the development
      machine a team thread woken at the start of a call so started only
      when the caller's range was done, and a 4 MB ``rope(x, out=out)``
      5 ms after the last took as long on two threads as on one (0.75-0.9
      ms); woken off the caller's CPU, the thread starts within 0.1 ms and
      the call takes 0.45-0.5 ms.
    - **Pulled onto the caller's CPU when late.** Where the other CPU is
      taken by a thread that spins (OpenBLAS's, for a while after each of
      numpy's matrix products), the team thread shares it, and can wait
      there for several milliseconds; Linux does not move it to the
      caller's CPU when that one falls idle (it had been idle too briefly).
      A caller about to sleep until a team thread is done moves that thread
      to its own CPU first.  In a loop of four 512x512 matrix products and
      that call, 1-3 calls in a hundred took 2-70 ms until it did.
    - **Anywhere otherwise.** A thread woken or pulled may run anywhere
      again once awake, or once it has woken the caller that pulled it (or
      that caller found it done).
    """

    def __init__(self, workers: int) -> None:
        self.cpus = _process_cpus()
        self.threads = [0] * (workers + 1)  # native ids, once started
        self.held = [False] * (workers + 1)

    def started(self, k: int) -> None:
        """Called by team thread ``k`` as it starts."""
        self.threads[k] = threading.get_native_id()

    def wake_off(self, k: int, cpu: int) -> None:
        """Have sleeping team thread ``k`` wake off ``cpu``, the caller's."""
        self._hold(k, self.cpus - {cpu}, cpu)

    def pull(self, k: int, cpu: int) -> None:
        """Move team thread ``k`` onto ``cpu``, the caller's."""
        self._hold(k, frozenset((cpu,)), cpu)

    def release(self, k: int) -> None:
        """Let team thread ``k`` run anywhere: called by the thread when woken
        and after it wakes the caller, and by a caller that pulled it too
        late (done before the pull)."""
        if self.held[k]:
            self.held[k] = False
            self._allow(self.threads[k], self.cpus)

    def _hold(self, k: int, cpus: frozenset[int], cpu: int) -> None:
        if cpu in self.cpus and self.threads[k]:  # else unknown, or no choice
            self.held[k] = True
            self._allow(self.threads[k], cpus)

    def _allow(self, thread: int, cpus: frozenset[int]) -> None:
        try:
            os.sched_setaffinity(thread, cpus)
        except OSError:  # the process's CPUs changed (a cpuset): leave it to the system
            self.cpus = frozenset()


def _process_cpus() -> frozenset[int]:
    """The CPUs this thread may run on, if there are two or more and the
    system lets threads be kept off one; else none."""
    if _sched_getcpu is None:
        return frozenset()
    cpus = frozenset(os.sched_getaffinity(0))
    return cpus if len(cpus) > 1 else frozenset()


def _find_sched_getcpu() -> Callable[[], int] | None:
    """The C library's ``sched_getcpu`` (Linux), or None."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        function = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = []
    return function  # type: ignore[no-any-return]


_sched_getcpu = _find_sched_getcpu()


def _current_cpu() -> int:
    """The CPU this thread runs on, or -1 where that is not known."""
    return -1 if _sched_getcpu is None else _sched_getcpu()


_team: _Team | None = None
_team_lock = threading.Lock()


def _free_team(workers: int) -> _Team | None:
    """The team with at least ``workers`` threads, locked for this call, or
    None if another call is using it or its threads could not start."""
    global _team
    with _team_lock:
        if _team is None or _team.workers < workers:
            _team = _Team(max(workers, _threads - 1))
        team = _team
    return None if team.stopped or not team.lock.acquire(blocking=False) else team


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
