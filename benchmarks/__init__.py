"""The benchmark suite: ``python -m benchmarks`` (see ``benchmarks.__main__``)."""

__all__: list[str] = []
