"""Every recorded Julia case, replayed without Julia: bit for bit, errors included."""

from __future__ import annotations

import pytest

from parity.fixtures import load
from parity.report import replay_case

HEADER, CASES = load()


def test_fixtures_are_the_recorded_ones():
    assert HEADER["package"] == "PositionalEmbeddings.jl"
    assert HEADER["package_version"] == "0.6.3"
    assert HEADER["julia_version"].startswith("1.10")
    assert len(CASES) >= 199
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case_replays_bit_for_bit(case):
    """Every output bit for bit with the input in C, F and strided layouts,
    the input left as it was; where Julia raised, this port's counterpart of
    its exception (``parity.report.replay_case``)."""
    row = replay_case(case)
    assert row.bitwise, f"{case.id} ({case.call} {case.args}): {row.note}"
