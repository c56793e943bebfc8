"""The live suite: every case of the matrix through the real Julia package and this one.

Runs where Julia is found (``pytest parity -m parity``); everywhere else the
whole module is skipped, with the reason, before anything starts.
"""

from __future__ import annotations

import pytest

from parity.bridge import JuliaCallError, julia_available, julia_call
from parity.calls import python_call
from parity.cases import all_cases, make_input
from parity.compare import compare

AVAILABLE, REASON = julia_available()
pytestmark = [pytest.mark.parity, pytest.mark.skipif(not AVAILABLE, reason=REASON)]
CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_bits_as_julia(case):
    x = None if case.x is None else make_input(case.x)
    try:
        expected = julia_call(case.call, case.args, x)
    except JuliaCallError as error:
        with pytest.raises((ValueError, TypeError)):
            python_call(case.call, case.args, x)
        assert error.type_name
        return
    actual = python_call(case.call, case.args, x)
    for name, value in expected.items():
        result = compare(actual[name], value)
        assert result.bitwise, f"{case.id} {name}: {result.describe()}"
