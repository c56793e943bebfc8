"""The benchmark command runs (tiny sizes) and writes its table as markdown and JSON.

No timing is asserted: only that every case runs, the table prints, the
files parse, the targets are judged as stated, and the contenders compute
what the package computes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import cases, timing
from benchmarks.__main__ import main, parse_arguments
from benchmarks.cases import GROUPS, Row
from benchmarks.report import (
    README_END,
    README_START,
    format_summary,
    format_text,
    last_level_cache,
    machine,
    replace_summary,
)
from benchmarks.targets import check_targets

ROOT = Path(__file__).resolve().parents[1]


SLOT_STEP = "decode rope(x, out=slot)"
CACHE = "(head, seq, batch) cache"


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
    for slots in ("slot", "successive slots"):
        assert f"{SLOT_STEP}, {slots} of a {CACHE}" in result.stdout
    assert "decode pe(x)" in result.stdout
    assert any(line.startswith("chunk rope(x), x stored") and "128×8×8×4" in line for line in lines)
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


def _row(
    group: str, case: str, shape: tuple[int, ...], seconds: float, floor: float, order: str = "C"
) -> Row:
    moved = 2 * 4 * math.prod(shape)  # float32 in and out
    return Row(group, case, shape, order, "float32", seconds, "x.copy()", floor, bytes_moved=moved)


def test_targets_are_judged_on_full_size_rows() -> None:
    rows = [
        _row("rope", "rope(x)", (128, 2048, 128), 0.020, 0.030),  # 0.67× copy, 13× Julia
        _row("pe", "pe(x)", (4096, 512, 16), 0.039, 0.033),  # 1.18× copy, 3.6× Julia
        _row("rope", "rope(x)", (128, 4096, 32), 0.011, 0.010),  # 64 MiB: judged, 1.1× copy
        _row("rope", "rope(x)", (64, 100, 256), 0.003, 0.001),  # 6.5 MB, in cache: not judged
        _row("rope-in-cache", "in-cache rope(x, out=out)", (128, 512, 32), 1.0, 1.2),
        _row("decode", "decode rope(x)", (128, 1, 32), 1.8e-6, 1e-6),
        _row("decode", "decode pe(x)", (1, 512, 32), 2.2e-6, 1e-6),  # no target of its own
        _row("decode", f"{SLOT_STEP}, successive slots of a {CACHE}", (128, 1, 32), 3e-6, 2e-6),
        _row(
            "decode",
            f"{SLOT_STEP}, x in the other order, slot of a {CACHE}",
            (128, 1, 32),
            3e-6,
            1e-6,
        ),
        _row("decode", f"{SLOT_STEP}, slot of a {CACHE}", (128, 1, 32), 2.1e-6, 1e-6),
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
        ("RoPE", f"{SLOT_STEP}, slot of a {CACHE} 128×1×32 C float32"): False,  # 2.1 µs
        ("RoPE(128,", "RoPE(128, 131072) 128×131072 float32"): True,
        ("cold", "cold start, warm cache"): False,
        ("≥", "rope(x) 128×2048×128 C float32"): True,
        ("≥", "pe(x) 4096×512×16 C float32"): False,
        ("≥", "decode rope(x) 128×1×32 C float32"): True,  # 1.8 µs: over 10× Julia's 19 µs
    }
    text = format_text(rows, check_targets(rows), machine())
    assert "Targets: 6 of 11 met." in text and text.count("MISSED") == 5


def test_unknown_case_names_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--cases", "rope", "no-such-case"])
    assert "invalid choice" in capsys.readouterr().err


def test_the_readme_summary_takes_its_rows_in_both_orders_and_the_target_count() -> None:
    rows = [
        _row("rope", "rope(x)", (128, 4096, 32), 0.011, 0.010, order)
        for order in "CF"  # both shown
    ]
    rows += [
        _row("rope", "rope(x)", (128, 512, 32), 0.001, 0.001),  # not a README row
        _row("decode", "decode rope(x)", (128, 1, 32), 1.8e-6, 1e-6),
        Row("rope", "rope(x)", (128, 2048, 128), "C", "float64", 0.03, "x.copy()", 0.04),
        Row("cold-start", "cold start, warm cache", (), "", "", 1.2, "import numba", 0.3),
    ]
    outcomes = check_targets(rows)
    met = sum(outcome.met for outcome in outcomes)
    assert 0 < met < len(outcomes)  # the cold start misses
    summary = format_summary(rows, outcomes, machine())
    table = [line for line in summary.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[:3] for line in table] == [
        ["| rope(x)", "128×4096×32", "C"],
        ["| rope(x)", "128×4096×32", "F"],
        ["| decode rope(x)", "128×1×32", "C"],
        ["| cold start, warm cache", "", ""],
    ]
    assert summary.startswith("Measured on ")
    heading = f"Targets: {met} of {len(outcomes)} met. The whole table: `docs/benchmarks.md`."
    assert summary.rstrip().endswith(heading)


def test_the_summary_replaces_only_what_lies_between_the_markers() -> None:
    text = f"intro\n{README_START}\nold table\n{README_END}\nafter\n"
    replaced = replace_summary(text, "new table\n")
    assert replaced == f"intro\n{README_START}\n\nnew table\n\n{README_END}\nafter\n"
    assert replace_summary(replaced, "new table\n") == replaced  # idempotent
    for broken in ("no markers", f"{README_END}\n{README_START}", f"{README_START} only"):
        with pytest.raises(ValueError, match="benchmark summary: start"):
            replace_summary(broken, "table")


def test_the_readme_option_wants_a_full_run_and_a_file_with_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in (["--quick"], ["--cases", "decode"]):
        with pytest.raises(SystemExit):
            parse_arguments(["--readme", "README.md", *extra])
        assert "--readme takes a full run" in capsys.readouterr().err
    unmarked = tmp_path / "README.md"
    unmarked.write_text("# no summary here\n", encoding="utf-8")
    assert main(["--readme", str(unmarked)]) == 2  # before any case runs
    assert "benchmark summary: start" in capsys.readouterr().err
    assert unmarked.read_text(encoding="utf-8") == "# no summary here\n"


def test_files_that_cannot_be_written_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder, or a path under a file, given for a file to write: exit
    status 2 and one line naming the path, before any case runs."""
    a_file = tmp_path / "a_file"
    a_file.write_text("kept\n", encoding="utf-8")
    for option in ("--markdown", "--json", "--readme"):
        for path, reason in [
            (tmp_path, "is a directory"),
            (a_file / "new" / "table.md", f"{a_file} is not a directory"),
        ]:
            assert main([option, str(path)]) == 2
            captured = capsys.readouterr()
            assert captured.err == f"python -m benchmarks: error: {path}: {reason}\n"
            assert captured.out == ""  # no table: nothing ran
    assert a_file.read_text(encoding="utf-8") == "kept\n"


def test_a_file_that_fails_after_the_run_leaves_the_table_and_exit_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("benchmarks.__main__._write", full_disk)
    path = tmp_path / "table.json"
    assert main(["--quick", "--repeat", "1", "--cases", "decode", "--json", str(path)]) == 1
    captured = capsys.readouterr()
    assert "decode rope(x)" in captured.out
    assert captured.err.endswith(
        f"python -m benchmarks: error: {path}: [Errno 28] No space left on device\n"
    )


def test_each_batch_of_calls_follows_an_eighth_as_many_untimed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Samples of 16 back-to-back calls each follow 2 untimed ones of the same
    contender (after the one warm-up call); samples of one call follow none."""
    calls = {"a": 0, "b": 0}

    def count(name: str) -> None:
        calls[name] += 1

    monkeypatch.setattr(timing, "_calls_per_sample", lambda function, seconds: 16)
    contenders = {name: partial(count, name) for name in calls}
    medians = timing.interleaved_medians(contenders, 3, sample_seconds=1.0)
    assert set(medians) == {"a", "b"} and calls == {"a": 1 + 3 * (2 + 16), "b": 1 + 3 * 18}
    calls.update(a=0, b=0)
    timing.interleaved_medians(contenders, 3)
    assert calls == {"a": 1 + 3, "b": 1 + 3}


def test_the_machine_line_names_the_largest_cache(tmp_path: Path) -> None:
    """Linux's description of CPU 0's caches: the highest level is named,
    in MiB; no description, no cache named."""
    for index, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "266240K")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "level").write_text(f"{level}\n")
        (tmp_path / f"index{index}" / "size").write_text(f"{size}\n")
    assert last_level_cache(tmp_path) == "L3 260 MiB"
    (tmp_path / "index3").mkdir()  # a level 4 whose size names no unit: not a size
    (tmp_path / "index3" / "level").write_text("4\n")
    (tmp_path / "index3" / "size").write_text("512\n")
    assert last_level_cache(tmp_path) == "L3 260 MiB"
    assert last_level_cache(tmp_path / "absent") is None
    info = {**machine(), "last_level_cache": "L3 260 MiB", "threads": 2}
    assert "2 CPUs, L3 260 MiB cache (large calls on 2 threads, copies and numpy on 1" in (
        format_text([], [], {**info, "cpus": 2})
    )


def _as_numpy(result: Any) -> np.ndarray:
    """A formula's result (a torch tensor, say) as a numpy array of its own."""
    return np.array(result.numpy() if hasattr(result, "numpy") else result)


def _in_our_axes(array: np.ndarray, ours: np.ndarray) -> np.ndarray:
    """A formula's result in the axes of the package's: the formulas of a
    batch-first step run on its (seq, features, batch) view, those of a 4-D
    query's step on its 3-D view (the batch axes merged in Julia's order)."""
    if array.shape == ours.shape:
        return array
    if ours.ndim == 3 and array.shape == ours.transpose(1, 2, 0).shape:
        return array.transpose(2, 0, 1)
    return array.reshape(ours.shape, order="F")


def test_the_contenders_compute_what_the_package_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row's numpy and torch formulas give the package's values (to
    their rounding) at the same positions, in every case that has them: a
    ratio to them compares the same work.  The formulas run first, then the
    package's call, once (in place, it rotates what the formulas read).
    The steps into successive slots are left out: the package writes the
    next position at each call, the formulas always the same one."""
    compared: set[str] = set()
    label = ""

    def compare(contenders: dict[str, Any], repeat: int, **_: object) -> dict[str, float]:
        formulas = {name: contenders[name] for name in ("numpy", "torch") if name in contenders}
        if formulas:
            results = {name: _as_numpy(formula()) for name, formula in formulas.items()}
            ours = np.array(contenders["ours"]())
            tolerance = {2: 2e-3, 4: 1e-6, 8: 1e-12}[ours.itemsize]
            for name, result in results.items():
                np.testing.assert_allclose(
                    _in_our_axes(result, ours),
                    ours,
                    rtol=tolerance,
                    atol=tolerance,
                    err_msg=f"{label}: {name}",
                )
            compared.add(label)
        return dict.fromkeys(contenders, 1e-3)

    monkeypatch.setattr(cases, "interleaved_medians", compare)
    for case in cases.all_cases(quick=True):
        if case.group in ("tables", "cold-start") or case.run.keywords.get("successive"):
            continue
        label = f"{case.run.func.__name__} {case.run.keywords}"
        case.run(cases.Settings(quick=True, repeat=1))
    assert len(compared) >= 30


def test_the_tables_contenders_build_the_package_s_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's tables follow Julia's steps as the package does (angles
    rounded to the table type; float16 through float32), within 1 ULP (its
    sin and cos are float64's, rounded): with float64 angles, its float16
    tables were more than 1 ULP off in 1% of the entries of the first 4
    positions, half of those past 512: another computation."""
    compared: list[str] = []

    def compare(contenders: dict[str, Any], repeat: int, **_: object) -> dict[str, float]:
        ours = contenders["ours"]()
        tables = (
            (ours.cos_cached, ours.sin_cached)
            if hasattr(ours, "cos_cached")
            else (ours.embeddings,)
        )
        results = contenders["numpy"]()
        for table, result in zip(tables, (results,) if len(tables) == 1 else results, strict=True):
            assert result.dtype == table.dtype
            np.testing.assert_array_max_ulp(result, table, maxulp=1)
        compared.append(tables[0].dtype.name)
        return dict.fromkeys(contenders, 1e-3)

    monkeypatch.setattr(cases, "interleaved_medians", compare)
    for case in cases.all_cases(quick=True):
        if case.group == "tables":
            case.run(cases.Settings(quick=True, repeat=1))
    assert compared == ["float32", "float16", "float32"]


def test_the_machine_line_names_what_numba_compiles_for() -> None:
    """Two of the development machines are both "AMD EPYC, 2 CPUs, L3 32
    MiB", one with AVX-512, one without, and their runs differ by up to 3×:
    the line names the CPU as Numba compiles for it, and its widest vectors."""
    info = {**machine(), "cpu": "AMD EPYC", "compiled_for": "znver3", "vectors": "AVX2", "cpus": 2}
    assert format_text([], [], info).startswith("AMD EPYC (znver3, AVX2), 2 CPUs")
    assert format_text([], [], {**info, "vectors": None}).startswith("AMD EPYC (znver3), ")
    assert machine()["vectors"] in (None, "AVX-512", "AVX2", "AVX", "SSE4.2")
