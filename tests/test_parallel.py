"""How a large call is split: every index once, errors raised in the caller
after the other ranges have finished."""

from __future__ import annotations

import os
import threading
import time
import warnings

import numba
import numpy as np
import pytest

from positional_embeddings import _parallel


@numba.njit(nogil=True)
def _count_visits(visits, start, stop, post):  # type: ignore[no-untyped-def]
    _parallel.posted(post)
    for i in range(start, stop):
        visits[i] += 1


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "_threads", 2)
    monkeypatch.setattr(_parallel, "MIN_BYTES_PER_THREAD", 1)


@pytest.mark.usefixtures("split_everything")
@pytest.mark.parametrize("length", [1, 2, 3, 17, 1000])
def test_every_index_is_visited_once(length: int) -> None:
    visits = np.zeros(length, np.int64)
    for _ in range(50):
        _parallel.run_ranges(_count_visits, length, 10**6, visits)
    assert (visits == 50).all()


@pytest.mark.usefixtures("split_everything")
def test_an_error_in_a_range_is_raised_after_the_others_finish() -> None:
    finished: list[tuple[int, int]] = []

    def kernel(start: int, stop: int, post: np.ndarray) -> None:
        if start == 0:
            raise RuntimeError("range 0 failed")
        time.sleep(0.05)  # still running when the first range fails
        finished.append((start, stop))

    with pytest.raises(RuntimeError, match="range 0 failed"):
        _parallel.run_ranges(kernel, 8, 10**6)
    assert finished and finished[0][1] == 8  # the other range had completed


@pytest.mark.usefixtures("split_everything")
def test_an_interrupt_while_waiting_is_raised_after_the_other_ranges_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``KeyboardInterrupt`` in the caller's wait for the team is raised
    once the team's ranges are done: raised at once, the team went on
    writing the call's ``out`` after the caller had caught it."""
    finished: list[int] = []

    def kernel(start: int, stop: int, post: np.ndarray) -> None:
        if start:  # the team's range
            time.sleep(0.05)
            finished.append(stop)

    wait = _parallel._Team._await
    interrupted: list[bool] = []

    def interrupted_once(team: _parallel._Team, count: int) -> None:
        if not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt
        wait(team, count)

    monkeypatch.setattr(_parallel._Team, "_await", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        _parallel.run_ranges(kernel, 8, 10**6)
    assert finished == [8]
    _parallel.run_ranges(kernel, 8, 10**6)  # and the team serves the next call
    assert finished == [8, 8]


@pytest.mark.parametrize(
    ("spins", "wait_spins"),
    [(0, 0), (0, 10**6), (10**6, 0), (10**6, 10**6)],
    ids=["both sleep", "caller spins", "team spins", "both spin"],
)
def test_every_hand_off_between_the_caller_and_the_team(spins: int, wait_spins: int) -> None:
    """Every way a range is handed over and handed back (a team thread
    asleep or spinning between calls; the caller spinning for the team or
    asleep until woken), with pauses between calls that let the team fall
    asleep: each index once per call, no call lost or run twice."""
    team = _parallel._Team(1)
    team.spins, team.wait_spins = spins, wait_spins
    visits = np.zeros(1000, np.int64)
    for call in range(200):
        if call % 10 == 0:
            time.sleep(0.002)
        team.idle_spins = spins
        team.run(_count_visits, [0, 1 + call % 999, 1000], (visits,))
    assert (visits == 200).all()


def test_the_team_sleeps_unless_calls_come_back_to_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A team thread that spun between calls would take a CPU from what the
    program does next (numpy's threaded matrix products): after a call that
    came long after the one before it sleeps at once, unless the last call
    that came so had one right after it (a query, then its key); after a
    call that came right after one, it spins ``SPIN_SECONDS`` at most, then
    sleeps.  (A window of 20 ms here, so that a busy machine still calls
    back to back.)"""
    team = _parallel._Team(1)
    window = 0.02
    monkeypatch.setattr(_parallel, "SPIN_SECONDS", window)
    team.spins = round(team.spins * window / 1e-4)
    visits = np.zeros(1000, np.int64)

    def call() -> None:
        team.run(_count_visits, [0, 500, 1000], (visits,))

    def asleep_soon() -> bool:
        deadline = time.perf_counter() + 1.0
        while time.perf_counter() < deadline:
            if team.asleep[_parallel._LINE]:
                return True
        return False

    call()
    time.sleep(2 * window)
    call()
    assert team.idle_spins == 0 and asleep_soon()
    time.sleep(2 * window)
    call()
    call()
    assert team.idle_spins == team.spins > 0 and asleep_soon()
    time.sleep(2 * window)
    call()
    assert team.idle_spins == team.spins and asleep_soon()
    time.sleep(2 * window)
    call()
    assert team.idle_spins == 0 and asleep_soon()
    assert (visits == 6).all()


def test_calls_from_many_threads_split_or_run_serially() -> None:
    """One call at a time uses the team; calls that find it busy run
    serially in their own thread: every index once per call, whoever ran it."""
    visits = [np.zeros(997, np.int64) for _ in range(4)]

    def calls(mine: np.ndarray) -> None:
        for _ in range(300):
            _parallel.run_ranges(_count_visits, mine.size, 10**6, mine)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_parallel, "_threads", 2)
        patch.setattr(_parallel, "MIN_BYTES_PER_THREAD", 1)
        threads = [threading.Thread(target=calls, args=(v,)) for v in visits]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert all((v == 300).all() for v in visits)


def test_a_range_is_claimed_once_among_threads_that_race_for_it() -> None:
    """The caller and a team thread may both try to take a range: of threads
    claiming the same range of the same call, exactly one succeeds."""
    claims = np.zeros(2 * _parallel._LINE, np.int64)
    rounds, racers = 300, 4
    won = np.zeros((rounds, racers), np.int64)
    barrier = threading.Barrier(racers)

    def race(who: int) -> None:
        for generation in range(1, rounds + 1):
            barrier.wait()
            won[generation - 1, who] = _parallel._claimed(claims, 1, generation)

    threads = [threading.Thread(target=race, args=(who,)) for who in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert (won.sum(axis=1) == 1).all()


def test_a_range_is_never_claimed_for_an_older_call() -> None:
    """A team thread held off its CPU may read a call's generation and try
    to claim it after the caller ran that range and a later call's too:
    the claim fails and the word keeps the later call's (it once went back,
    and the thread ran the later call's range a second time)."""
    claims = np.zeros(2 * _parallel._LINE, np.int64)
    claims[_parallel._LINE] = 1256
    assert not _parallel._claimed(claims, 1, 1255)
    assert not _parallel._claimed(claims, 1, 1256)
    assert claims[_parallel._LINE] == 1256
    assert _parallel._claimed(claims, 1, 1257)
    assert claims[_parallel._LINE] == 1257


def test_a_team_thread_passes_over_a_range_the_caller_claimed() -> None:
    posted = np.array([0, 7], np.int64)
    claims = np.zeros(2 * _parallel._LINE, np.int64)
    asleep = np.zeros(2 * _parallel._LINE, np.int64)
    claims[_parallel._LINE] = 7  # the caller ran call 7's range 1 itself
    assert _parallel._next_range(posted, claims, asleep, 1, 1000) == 0
    assert asleep[_parallel._LINE] == 1
    posted[1] = 8
    assert _parallel._next_range(posted, claims, asleep, 1, 1000) == 8
    assert claims[_parallel._LINE] == 8 and asleep[_parallel._LINE] == 0


class _HeldEvent(threading.Event):
    """A team thread's wake-up that does not come until ``let_go`` is set:
    the thread sleeps through the calls meanwhile."""

    def __init__(self, let_go: threading.Event) -> None:
        super().__init__()
        self.let_go = let_go

    def wait(self, timeout: float | None = None) -> bool:
        self.let_go.wait()
        return super().wait(timeout)


def test_the_caller_runs_a_range_no_team_thread_started() -> None:
    """A team thread that does not get a CPU (here: is not woken) holds up
    no call: the caller, done with its own range, runs the other one too;
    when the thread wakes at last it passes over that range (every index
    once) and takes the next call's."""
    team = _parallel._Team(1)
    team.spins = team.wait_spins = 0  # the thread sleeps between calls
    let_go = threading.Event()
    while not team.asleep[_parallel._LINE]:
        time.sleep(0.001)
    team.wakes[1] = _HeldEvent(let_go)
    visits = np.zeros(1000, np.int64)
    ran_by: list[str] = []

    def kernel(visits: np.ndarray, start: int, stop: int, post: np.ndarray) -> None:
        ran_by.append(threading.current_thread().name)
        visits[start:stop] += 1

    for _ in range(5):
        team.run(kernel, [0, 400, 1000], (visits,))
    assert (visits == 5).all()
    assert ran_by == [threading.current_thread().name] * 10
    let_go.set()
    deadline = time.perf_counter() + 10
    while team.asleep[_parallel._LINE] and time.perf_counter() < deadline:
        time.sleep(0.001)  # awake, it finds nothing new, and sleeps again
    time.sleep(0.05)
    team.wakes[1] = threading.Event()
    team.wait_spins = 10**6
    team.run(kernel, [0, 400, 1000], (visits,))
    assert (visits == 6).all()
    assert len(ran_by) == 12


@pytest.mark.skipif(
    not _parallel._process_cpus(), reason="needs Linux and two or more CPUs for this process"
)
def test_a_team_thread_is_steered_only_while_it_wakes_or_runs_late() -> None:
    """Woken off the caller's CPU, pulled onto it when late, and free to
    run anywhere once awake or done (``_Steering``)."""
    steering = _parallel._Steering(1)
    cpus = steering.cpus
    cpu = min(cpus)
    ready, step, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def team_thread() -> None:
        steering.started(1)
        ready.set()
        for _ in range(2):
            step.wait()
            step.clear()
            seen.append(os.sched_getaffinity(0))
            steering.release(1)
            seen.append(os.sched_getaffinity(0))
            done.set()

    thread = threading.Thread(target=team_thread)
    thread.start()
    ready.wait()
    steering.wake_off(1, cpu)
    step.set()
    done.wait()
    done.clear()
    steering.pull(1, cpu)
    step.set()
    done.wait()
    thread.join()
    assert seen == [set(cpus - {cpu}), set(cpus), {cpu}, set(cpus)]


@pytest.mark.parametrize(
    "value, expected, warning",
    [
        (None, 7, None),
        ("3", 3, None),
        ("abc", 7, "'abc' is not an integer; using 7"),
        ("1e3", 7, "'1e3' is not an integer; using 7"),
        ("-4", 0, "-4 is outside 0..50; using 0"),
        (str(10**20), 50, f"{10**20} is outside 0..50; using 50"),
    ],
)
def test_settings_from_the_environment_are_bounded_and_typos_warned(
    monkeypatch, value, expected, warning
):
    """``POSITIONAL_EMBEDDINGS_NUM_THREADS`` and ``_SPIN_US`` as read at
    import: a value that is no integer, or out of bounds, warns and gives
    the default or the nearest bound (a spin of 1e20 us stopped a team
    thread with an error, and the next split call waited for it forever)."""
    name = "POSITIONAL_EMBEDDINGS_TEST_SETTING"
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _parallel._configured(name, 7, 0, 50) == expected
    assert [str(w.message) for w in caught] == ([f"{name}={warning}"] if warning else [])
    assert all(w.category is RuntimeWarning for w in caught)


@pytest.mark.parametrize("startable", [0, 1])
def test_a_team_that_cannot_start_every_thread_ends_those_it_started(
    monkeypatch: pytest.MonkeyPatch, startable: int
) -> None:
    """Where the system refuses a thread (a tight ``ulimit -v`` with many
    threads asked for), the threads that did start end and large calls run
    serially: every call raised ``can't start new thread``, and the threads
    kept running filled what the limit allowed.  Warned once, not retried."""
    attempts: list[int] = []
    start = threading.Thread.start

    def refusing_start(thread: threading.Thread) -> None:
        attempts.append(1)
        if len(attempts) > startable:
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(_parallel, "_threads", 4)
    monkeypatch.setattr(_parallel, "MIN_BYTES_PER_THREAD", 1)
    monkeypatch.setattr(_parallel, "_team", None)
    monkeypatch.setattr(threading.Thread, "start", refusing_start)
    visits = np.zeros(1000, np.int64)
    running = threading.active_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            _parallel.run_ranges(_count_visits, len(visits), 10**6, visits)
    assert (visits == 20).all()
    assert len(attempts) == startable + 1
    assert threading.active_count() == running
    assert [str(w.message) for w in caught] == [
        f"positional_embeddings could not start thread {startable + 1} of 3"
        " (can't start new thread): large calls run serially;"
        " POSITIONAL_EMBEDDINGS_NUM_THREADS asks for fewer threads"
    ]
    assert caught[0].category is RuntimeWarning
