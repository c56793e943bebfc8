"""Parity with the real PositionalEmbeddings.jl 0.6.3: recorded outputs, a live suite, a report.

- ``fixtures/``: outputs recorded from the Julia package (provenance in its
  README), replayed by ``test_replay.py`` in every test run, without Julia.
- ``compare``: bit-for-bit comparison, with ULP distances where bits differ.
- ``calls``: how a case (Julia's call and arguments) runs, on either side.
- ``cases``: the case matrix of the live suite and the recorder.
- ``bridge``: Julia through juliacall, started only when asked, never downloaded.
- ``fixtures``, ``record``, ``report``: reading and writing recordings, the table.
- ``python -m parity report | record``: see ``__main__``.

Nothing here imports the package or juliacall at import time (Julia must
start before Numba loads; see ``bridge``).
"""
