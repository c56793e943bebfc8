"""The benchmark command runs (tiny sizes) and writes its table as markdown and JSON."""

from __future__ import annotations

import json

from benchmarks.__main__ import main


def test_quick_benchmark_writes_its_tables(tmp_path, capsys):
    markdown, payload = tmp_path / "table.md", tmp_path / "table.json"
    assert main(["--quick", "--markdown", str(markdown), "--json", str(payload)]) == 0
    out = capsys.readouterr().out
    assert "rope(x)" in out and "vs floor" in out and "RoPE(128, 1024)" in out
    assert markdown.read_text().count("|") > 50
    rows = json.loads(payload.read_text())["rows"]
    assert {row["case"] for row in rows} >= {"rope(x)", "rope(x, out=out)", "pe(x)"}
    assert all(row["seconds"] > 0 for row in rows)
