"""The live suite: every case of the matrix through the real Julia package and this one.

Where Julia is available (see ``parity.bridge.julia_available``), ``pytest``
or ``pytest parity`` runs it; ``-m "not parity"`` leaves it out.  Elsewhere
the whole module is skipped, with one reason, before any case is built.  The
repository's ``conftest.py`` starts Julia before any test module imports
the package (juliacall must load before Numba).
"""

from __future__ import annotations

import pytest

from parity.bridge import JuliaCallError, julia_available, julia_call
from parity.calls import python_call
from parity.cases import all_cases
from parity.compare import compare_outputs, describe_failures

AVAILABLE, REASON = julia_available()
if not AVAILABLE:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.parity
CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_bits_as_julia(case):
    x = case.build_input()
    before = None if x is None else x.copy()
    if case.stricter_than_julia:
        with pytest.raises(ValueError):
            python_call(case.call, case.args, x)
        return
    try:
        expected = julia_call(case.call, case.args, x)
    except JuliaCallError as error:
        with pytest.raises((ValueError, TypeError)):
            python_call(case.call, case.args, x)
        assert error.type_name
        return
    actual = python_call(case.call, case.args, x)
    failures = describe_failures(compare_outputs(actual, expected))
    assert not failures, f"{case.id} ({case.call} {case.args}):\n{failures}"
    if before is not None:
        assert before.tobytes() == x.tobytes(), "the input was modified"
