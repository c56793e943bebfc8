"""Parity with the real PositionalEmbeddings.jl: recorded outputs, a live suite, a report.

- ``fixtures/``: outputs recorded from the Julia package (provenance in its README).
- ``compare``: bit-for-bit comparison, with ULP distances for the report.
- ``calls``: how a case (Julia's call and arguments) runs on the Python side.
- ``cases``: the case matrix of the live suite and the recorder.
- ``bridge``: Julia through juliacall, started only when asked.
- ``python -m parity report | record``: see ``__main__``.
"""
