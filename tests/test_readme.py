"""The README's Python example runs, and its two commands are the ones CI uses."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_the_two_commands_open_the_readme():
    commands = re.findall(r"```bash\n(.*?)```", README, flags=re.S)[:2]
    assert "python -m positional_embeddings" in commands[0]
    assert "pytest" in commands[1]
    assert commands[1].strip() in (ROOT / ".ci" / "run").read_text() or "test-command" in README


def test_the_benchmark_summary_is_part_of_the_full_table():
    """The README's rows come from the run docs/benchmarks.md shows: each of
    its lines is one of that table's, under the same machine line."""
    from benchmarks.report import README_END, README_ROWS, README_START

    summary = README.split(README_START, 1)[1].split(README_END, 1)[0].strip().splitlines()
    full = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
    assert summary[0] == full[0] and summary[0].startswith("Measured on ")
    rows = [line for line in summary if line.startswith("| ")]
    assert all(line in full for line in rows)
    for case, shape, dtype in README_ROWS:  # each chosen row is there (the run had it)
        shape_text = "×".join(map(str, shape))
        assert any(line.split(" | ")[:2] == [f"| {case}", shape_text] for line in rows), case
        assert any(f" | {dtype} | " in line for line in rows if line.startswith(f"| {case} |"))
    targets = next(line for line in full if line.startswith("Targets: "))
    assert summary[-1].startswith(targets)
