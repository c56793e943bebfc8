"""The benchmark command runs (tiny sizes) and writes its table as markdown and JSON.

No timing is asserted: only that every case runs, the table prints, the
files parse, and the targets are judged as stated.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import parse_arguments
from benchmarks.cases import GROUPS, Row
from benchmarks.report import format_text, machine
from benchmarks.targets import check_targets

ROOT = Path(__file__).resolve().parents[1]


def test_quick_run_prints_the_table_and_writes_markdown_and_json(tmp_path: Path) -> None:
    markdown, payload = tmp_path / "new" / "table.md", tmp_path / "table.json"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "benchmarks", "--quick", "--repeat", "1"]
    command += ["--markdown", str(markdown), "--json", str(payload)]
    result = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[2].split() == "case shape order dtype median GB/s vs floor vs numpy vs torch".split()
    )
    assert "rope(x)  " in result.stdout
    assert "decode rope(x, out=out)" in result.stdout and "decode rope(x, out=x)" in result.stdout
    assert "decode pe(x)" in result.stdout
    assert "Targets: not checked with --quick" in result.stdout

    data = json.loads(payload.read_text(encoding="utf-8"))
    rows = data["rows"]
    assert {row["group"] for row in rows} == set(GROUPS)
    assert all(row["seconds"] > 0 for row in rows)
    assert all(row["vs_floor"] > 0 for row in rows if row["floor"])
    assert data["targets"] is None and data["settings"]["quick"] is True

    table = [line for line in markdown.read_text(encoding="utf-8").splitlines() if line[:1] == "|"]
    assert table[0].startswith("| case | shape |") and len(table) == 2 + len(rows)
    assert all(line.count("|") == table[0].count("|") for line in table)


def _row(group: str, case: str, shape: tuple[int, ...], seconds: float, floor: float) -> Row:
    moved = 2 * 4 * math.prod(shape)  # float32 in and out
    return Row(group, case, shape, "C", "float32", seconds, "x.copy()", floor, bytes_moved=moved)


def test_targets_are_judged_on_full_size_rows() -> None:
    rows = [
        _row("rope", "rope(x)", (128, 2048, 128), 0.020, 0.030),  # 0.67× copy, 13× Julia
        _row("pe", "pe(x)", (4096, 512, 16), 0.039, 0.033),  # 1.18× copy, 3.6× Julia
        _row("rope", "rope(x)", (128, 4096, 32), 0.011, 0.010),  # 64 MiB: judged, 1.1× copy
        _row("rope", "rope(x)", (64, 100, 256), 0.003, 0.001),  # 6.5 MB, in cache: not judged
        _row("rope-in-cache", "in-cache rope(x, out=out)", (128, 512, 32), 1.0, 1.2),
        _row("decode", "decode rope(x)", (128, 1, 32), 1.8e-6, 1e-6),
        _row("decode", "decode pe(x)", (1, 512, 32), 2.2e-6, 1e-6),  # no target of its own
        Row("tables", "RoPE(128, 131072)", (128, 131072), "", "float32", 0.054),
        Row("cold-start", "cold start, warm cache", (), "", "", 1.2, "import numba", 0.4),
    ]
    verdicts = {(o.target.split(" ")[0], o.row): o.met for o in check_targets(rows)}
    assert verdicts == {
        ("allocating", "rope(x) 128×2048×128 C float32"): True,
        ("allocating", "pe(x) 4096×512×16 C float32"): False,
        ("allocating", "rope(x) 128×4096×32 C float32"): True,
        ("in-cache", "in-cache rope(x, out=out) 128×512×32 C float32"): False,  # 1.2×, 1.3× asked
        ("RoPE", "decode rope(x) 128×1×32 C float32"): True,
        ("RoPE(128,", "RoPE(128, 131072) 128×131072 float32"): True,
        ("cold", "cold start, warm cache"): False,
        ("≥", "rope(x) 128×2048×128 C float32"): True,
        ("≥", "pe(x) 4096×512×16 C float32"): False,
        ("≥", "decode rope(x) 128×1×32 C float32"): True,  # 1.8 µs: over 10× Julia's 19 µs
    }
    text = format_text(rows, check_targets(rows), machine())
    assert "Targets: 6 of 10 met." in text and text.count("MISSED") == 4


def test_unknown_case_names_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--cases", "rope", "no-such-case"])
    assert "invalid choice" in capsys.readouterr().err
