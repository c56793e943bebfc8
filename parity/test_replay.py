"""Every recorded Julia case, replayed without Julia: bit for bit, errors included."""

from __future__ import annotations

import pytest

from parity.calls import python_call
from parity.compare import compare_outputs, describe_failures
from parity.fixtures import load

HEADER, CASES = load()


def test_fixtures_are_the_recorded_ones():
    assert HEADER["package"] == "PositionalEmbeddings.jl"
    assert HEADER["package_version"] == "0.6.3"
    assert HEADER["julia_version"].startswith("1.10")
    assert len(CASES) >= 199
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case_replays_bit_for_bit(case):
    if case.error is not None:
        with pytest.raises((ValueError, TypeError)):
            python_call(case.call, case.args, case.x)
        return
    before = None if case.x is None else case.x.copy()
    outputs = python_call(case.call, case.args, case.x)
    failures = describe_failures(compare_outputs(outputs, case.outputs))
    assert not failures, f"{case.id} ({case.call} {case.args}):\n{failures}"
    if before is not None:
        assert before.tobytes() == case.x.tobytes(), "the input was modified"
