"""How a large call is split: every index once, errors raised in the caller
after the other ranges have finished."""

from __future__ import annotations

import threading
import time

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
    came long after the one before it sleeps at once; after a call that
    came right after one, it spins ``SPIN_SECONDS`` at most, then sleeps.
    (A window of 20 ms here, so that a busy machine still calls back to back.)"""
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
    assert (visits == 4).all()


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
