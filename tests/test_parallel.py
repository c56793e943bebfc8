"""How a large call is split: every index once, errors raised in the caller
after the other ranges have finished."""

from __future__ import annotations

import time

import numba
import numpy as np
import pytest

from positional_embeddings import _parallel


@numba.njit(nogil=True)
def _count_visits(visits, start, stop):  # type: ignore[no-untyped-def]
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

    def kernel(start: int, stop: int) -> None:
        if start == 0:
            raise RuntimeError("range 0 failed")
        time.sleep(0.05)  # still running when the first range fails
        finished.append((start, stop))

    with pytest.raises(RuntimeError, match="range 0 failed"):
        _parallel.run_ranges(kernel, 8, 10**6)
    assert finished and finished[0][1] == 8  # the other range had completed
