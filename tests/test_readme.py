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
