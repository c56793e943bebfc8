"""The benchmark suite: ``python -m benchmarks`` (see ``__main__``)."""
