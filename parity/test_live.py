"""The live suite: every case of the matrix through the real Julia package and this one.

Where Julia is available (see ``parity.bridge.julia_available``), ``pytest``
or ``pytest parity`` runs it; ``-m "not parity"`` leaves it out.  Elsewhere
the whole module is skipped, with one reason, before any case is built.  The
repository's ``conftest.py`` starts Julia before any test module imports
the package (juliacall must load before Numba).
"""

from __future__ import annotations

import pytest

from parity.bridge import julia_available
from parity.cases import all_cases
from parity.record import run_matrix
from parity.report import replay_case

AVAILABLE, REASON = julia_available()
if not AVAILABLE:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.parity
CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_bits_as_julia(case):
    """As the recorded cases replay (``parity.report.replay_case``), with
    Julia's outputs or error from this run; where this port is stricter than
    Julia on purpose, a ``ValueError``."""
    (ran,) = run_matrix([case])
    row = replay_case(ran)
    assert row.bitwise, f"{case.id} ({case.call} {case.args}): {row.note}"
