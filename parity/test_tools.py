"""The parity tools themselves, without Julia: comparison, case matrix, bridge, recorder, report."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parity import __main__ as parity_main
from parity import bridge, fixtures
from parity import record as parity_record
from parity import report as parity_report
from parity.__main__ import main
from parity.bridge import JuliaCallError, julia_available, julia_environment
from parity.calls import CALLS, JULIA_TYPES, CaseError, python_axis, python_call, run_case
from parity.cases import CaseSpec, InputSpec, all_cases, make_input
from parity.compare import compare, compare_outputs, describe_failures, ulp_distance
from parity.fixtures import Case, load, save
from parity.record import run_matrix
from parity.report import format_markdown, format_text, replay

CASES = all_cases()
JULIA_VARIABLES = ("PYTHON_JULIACALL_EXE", "PYTHON_JULIACALL_PROJECT", "PYTHON_JULIAPKG_EXE")


@pytest.fixture
def no_julia(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment without any Julia."""
    for name in JULIA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.fixture
def fake_julia(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A ``julia`` on the PATH that is never run."""
    for name in JULIA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    executable = tmp_path / "julia"
    executable.write_text("#!/bin/sh\nexit 1\n")
    executable.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    return str(executable)


# compare


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_representable_values(dtype: type[np.floating]) -> None:
    one = np.array([1.0, 0.0, -0.0, np.inf], dtype=dtype)
    up = np.nextafter(one, np.array(np.inf, dtype=dtype))
    assert ulp_distance(one, up).tolist() == [1, 1, 2, 0]  # -0.0 -> +0.0 -> tiny
    assert ulp_distance(np.array([0.0], dtype), np.array([-0.0], dtype)).tolist() == [1]
    tiny = np.finfo(dtype).smallest_subnormal
    assert ulp_distance(np.array([tiny], dtype), np.array([-tiny], dtype)).tolist() == [3]


def test_nan_payloads_do_not_count_but_nan_positions_do() -> None:
    quiet = np.array([np.nan, 1.0], dtype=np.float32)
    payload = quiet.copy()
    payload.view(np.uint32)[0] |= 0x1234
    assert compare(payload, quiet).bitwise
    result = compare(np.array([1.0, 1.0], dtype=np.float32), quiet)
    assert (result.differing, result.nan_mismatches, result.max_ulp) == (1, 1, 0)
    assert "NaN on one side only" in result.describe()


def test_shape_dtype_and_integer_differences_are_reported() -> None:
    a = np.zeros((2, 3), dtype=np.float32)
    assert compare(a, a.astype(np.float64)).describe() == (
        "got float32(2, 3), expected float64(2, 3)"
    )
    assert not compare(a, a.T.copy()).bitwise
    ints = compare(np.array([1, 5, -3]), np.array([1, 2, -3]))
    assert (ints.max_ulp, ints.differing, ints.bitwise) == (3, 1, False)
    bools = compare(np.array([True, False]), np.array([True, True]))
    assert (bools.max_ulp, bools.differing) == (1, 1)
    with pytest.raises(ValueError):
        ulp_distance(np.zeros(2, np.int64), np.zeros(2, np.int64))


def test_failures_name_each_output() -> None:
    expected = {"cos_cached": np.ones(4, np.float32), "sin_cached": np.zeros(4, np.float32)}
    actual = {"cos_cached": np.nextafter(expected["cos_cached"], np.float32(2))}
    text = describe_failures(compare_outputs(actual, expected))
    assert text == "cos_cached: 4 of 4 elements differ, up to 1 ULP\nsin_cached: missing"
    assert describe_failures(compare_outputs(expected, expected)) == ""


# the case matrix and the calls


def test_matrix_is_json_with_unique_ids_and_known_calls() -> None:
    assert len({case.id for case in CASES}) == len(CASES)
    assert {case.call for case in CASES} == set(CALLS)
    json.dumps([[case.id, case.call, case.args] for case in CASES])


def test_matrix_covers_the_brief() -> None:
    ropes = [case.args for case in CASES if case.call.startswith("RoPE")]
    head_sizes = {args["head_size"] for args in ropes}
    assert {2, 4, 8, 16, 32, 64, 96, 128, 256, 1, 3, 7, 15} <= head_sizes
    assert {1, 131072} <= {args["seq_len"] for args in ropes}
    bases = [args["base"] for args in ropes if "base" in args]
    assert {10_000, 500_000, 1e6} <= set(bases)
    assert any(isinstance(base, float) for base in bases)
    assert any(isinstance(base, int) for base in bases)
    assert {1, 0.25, 8} <= {args.get("scale", 1) for args in ropes}
    assert {"Float16", "Float32", "Float64"} <= {args.get("T", "Float32") for args in ropes}
    inputs = [case.x for case in CASES if case.x is not None]
    assert {spec.dtype for spec in inputs} == set(JULIA_TYPES)
    assert {spec.layout for spec in inputs} == {"C", "F", "strided"}
    assert {3, 4, 5} <= {len(spec.shape) for spec in inputs}


def test_inputs_are_deterministic_and_in_their_layout() -> None:
    spec = InputSpec((16, 10, 3), "Float32", "strided")
    x = make_input(spec, seed=7)
    assert x.shape == (16, 10, 3) and x.strides[-1] < 0
    assert x.tobytes() == make_input(spec, seed=7).tobytes()
    assert make_input(InputSpec((4, 5, 2), "Int64", "F"), seed=1).flags.f_contiguous
    assert make_input(InputSpec((4, 5, 2), "Bool", "C"), seed=1).flags.c_contiguous
    bits = x.view(np.uint32)
    assert np.isnan(x).any() and np.isinf(x).any()
    assert (bits == 0x80000000).any() and (bits == 0).any()
    assert (bits == 1).any()  # the smallest subnormal
    case = next(case for case in CASES if case.x is not None)
    first, second = case.build_input(), case.build_input()
    assert first is not None and second is not None
    assert first.tobytes() == second.tobytes()


def test_calls_convert_julia_conventions() -> None:
    assert python_axis(1) == 0
    with pytest.raises(ValueError):
        python_axis(0)
    with pytest.raises(CaseError, match="unknown parity call"):
        python_call("nonsense", {}, None)
    with pytest.raises(CaseError, match="needs an input"):
        python_call("neg_half", {"dim": 1}, None)


def test_keyword_arguments_reach_the_api_with_their_types() -> None:
    class Recorder:
        def RoPE(self, head_size: int, seq_len: int, **keywords: Any) -> Any:
            self.arguments = (head_size, seq_len, keywords)
            return lambda x: x

    api = Recorder()
    args = {"head_size": 8, "seq_len": 5, "base": 10_000.0, "scale": 8, "T": "Float16"}
    run_case(api, "RoPE.apply", args, np.zeros((8, 5, 1)))
    assert api.arguments == (8, 5, {"base": 10_000.0, "scale": 8, "T": np.float16})
    assert isinstance(api.arguments[2]["scale"], int)


# the bridge, without Julia


def test_no_julia_means_unavailable_at_once(no_julia: None) -> None:
    imported = "juliacall" in sys.modules
    available, reason = julia_available()
    assert not available
    assert "PYTHON_JULIACALL_EXE" in reason
    with pytest.raises(RuntimeError, match="no Julia found"):
        bridge.julia.__wrapped__()
    bridge.start_if_available()
    assert ("juliacall" in sys.modules) == imported


def test_a_failed_start_is_the_reason_to_skip(
    fake_julia: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "juliacall" in sys.modules:
        pytest.skip("Julia already runs in this process")
    for name in julia_environment():  # julia() sets them: restore them afterwards
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(bridge, "_start_failure", None)
    monkeypatch.setattr(bridge.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setitem(sys.modules, "juliacall", None)  # importing it fails
    assert julia_available()[0]
    bridge.start_if_available()
    available, reason = julia_available()
    assert not available
    assert "could not load PositionalEmbeddings" in reason and "juliapkg.resolve()" in reason
    assert os.environ["PYTHON_JULIAPKG_OFFLINE"] == "yes"
    assert os.environ["PYTHON_JULIAPKG_EXE"] == fake_julia


def test_a_missing_executable_is_not_available(
    no_julia: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHON_JULIACALL_EXE", str(tmp_path / "nowhere" / "julia"))
    available, reason = julia_available()
    assert not available and "does not exist" in reason


def test_julia_on_the_path_needs_juliacall(
    fake_julia: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bridge.importlib.util, "find_spec", lambda name: None)
    available, reason = julia_available()
    assert not available
    assert fake_julia in reason and "juliacall is not installed" in reason


def test_environment_is_offline_single_threaded_with_signals(fake_julia: str) -> None:
    changes = julia_environment()
    assert changes["PYTHON_JULIAPKG_OFFLINE"] == "yes"
    assert changes["JULIA_PKG_OFFLINE"] == "true"
    assert changes["PYTHON_JULIACALL_THREADS"] == "1"
    assert changes["PYTHON_JULIACALL_HANDLE_SIGNALS"] == "yes"
    assert changes["PYTHON_JULIAPKG_EXE"] == fake_julia


def test_juliacall_exe_alone_goes_to_juliapkg() -> None:
    changes = julia_environment({"PYTHON_JULIACALL_EXE": "/opt/julia/bin/julia", "PATH": ""})
    assert changes["PYTHON_JULIAPKG_EXE"] == "/opt/julia/bin/julia"
    assert changes["PYTHON_JULIACALL_EXE"] is None
    both = {"PYTHON_JULIACALL_EXE": "/opt/julia", "PYTHON_JULIACALL_PROJECT": "/p", "PATH": ""}
    assert "PYTHON_JULIAPKG_EXE" not in julia_environment(both)
    assert "PYTHON_JULIACALL_EXE" not in julia_environment(both)


# recording, reading back, reporting


def _python_as_julia(
    call: str, args: Mapping[str, Any], x: np.ndarray | None
) -> dict[str, np.ndarray]:
    """This package standing in for Julia, raising as the bridge does."""
    try:
        return python_call(call, args, x)
    except (ValueError, TypeError) as error:
        raise JuliaCallError(type(error).__name__, str(error)) from None


SIZES = ("dim", "seq_len", "head_size", "embedding_size", "max_length", "max_len")


def _small(case: CaseSpec) -> bool:
    sizes = [abs(value) for key, value in case.args.items() if key in SIZES]
    return bool(np.prod(sizes) <= 4096 and (case.x is None or np.prod(case.x.shape) <= 4096))


def test_recordings_read_back_and_replay(tmp_path: Path) -> None:
    picked: dict[str, list[CaseSpec]] = {}
    for case in filter(_small, CASES):
        picked.setdefault(case.call, []).append(case)
    failing = {"RoPE-head_size=15-seq_len=10", "create_causal_mask-seq_len=0"}
    specs = [case for cases in picked.values() for case in cases[:3]]
    specs += [case for case in CASES if case.id in failing]
    cases = run_matrix(specs, run=_python_as_julia)
    header = {"julia_version": "0.0", "cpu": "none", "package": "stand-in", "package_version": "0"}
    assert save(tmp_path, header, cases) == len(specs)
    loaded_header, loaded = load(tmp_path)
    assert loaded_header["cpu"] == "none" and "layout" in loaded_header
    assert [case.id for case in loaded] == [spec.id for spec in specs]
    assert any(case.error for case in loaded)
    rows = replay(loaded)
    assert all(row.bitwise for row in rows), [row for row in rows if not row.bitwise]


def test_report_names_the_recording_and_every_case() -> None:
    header, cases = load()
    rows = replay(cases[:3] + [case for case in cases if case.error][:2])
    text = format_text(rows, header)
    assert "Julia 1.10.5" in text and "CPU rocketlake" in text and "0.6.3" in text
    assert all(row.case in text for row in rows)
    assert text.endswith(f"{len(rows)} of {len(rows)} cases bit for bit")
    markdown = format_markdown(rows, header)
    assert markdown.count("\n| ") == len(rows) + 1


def test_report_flags_a_difference() -> None:
    header, cases = load()
    case = next(case for case in cases if case.call == "RoPE")

    def off_by_one(
        call: str, args: Mapping[str, Any], x: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        outputs = python_call(call, args, x)
        cos = outputs["cos_cached"].copy()
        cos.flat[0] = np.nextafter(cos.flat[0], np.float32(0))
        return {**outputs, "cos_cached": cos}

    (row,) = replay([case], run=off_by_one)
    assert (row.bitwise, row.max_ulp, row.differing) == (False, 1, 1)
    assert "NO" in format_text([row], header)


@pytest.mark.parametrize("argv", [["report", "--live"], ["record", "--out", "unused"]])
def test_commands_needing_julia_exit_1_without_it(
    argv: list[str], no_julia: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    assert "no Julia found" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["in a file", ""])
def test_report_to_a_file_that_cannot_be_written_fails_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
) -> None:
    """A path under a file, or an empty one (which printed to stdout)."""
    header, cases = load()
    monkeypatch.setattr(fixtures, "load", lambda: (header, cases[:2]))
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "a file"
    blocker.write_text("")
    output = str(blocker / "report.md") if target else ""
    assert main(["report", "--output", output]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("python -m parity report: ") and captured.err.count("\n") == 1
    assert captured.out == ""


def _recorded(call: str = "RoPE.apply", **fields: Any) -> Case:
    """A recorded case of ``RoPE(16, 10)`` on a small input, with this
    package's outputs as Julia's unless ``fields`` say otherwise."""
    args = {"head_size": 16, "seq_len": 10}
    x = make_input(InputSpec((16, 4, 3)), seed=1)
    outputs = python_call(call, args, x)
    return Case(
        **{
            "id": "a",
            "call": call,
            "args": args,
            "x": x,
            "outputs": outputs,
            "error": None,
            **fields,
        }
    )


def test_a_case_with_nothing_recorded_is_not_a_pass() -> None:
    (row,) = replay([_recorded(outputs={})])
    assert not row.bitwise and "no outputs" in row.note


@pytest.mark.parametrize(
    "julia, raised, passes",
    [
        ("AssertionError", ValueError, True),
        ("DimensionMismatch", ValueError, True),
        ("AssertionError", TypeError, False),
        ("MethodError", TypeError, True),
        ("MethodError", ValueError, False),
        ("SomeNewError", TypeError, True),
    ],
)
def test_julias_errors_need_their_counterparts(julia: str, raised: type, passes: bool) -> None:
    """Where Julia raised, the port must raise its counterpart
    (``python_errors``), not just any ValueError or TypeError."""

    def raising(call: str, args: Mapping[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
        raise raised("refused")

    case = _recorded(outputs={}, error={"type": julia, "message": ""})
    (row,) = replay([case], run=raising)
    assert row.bitwise is passes, row.note


def test_a_case_the_harness_cannot_run_is_not_julias_error() -> None:
    """A case recorded without its input fails in the harness (``CaseError``),
    which never stands for the error Julia raised."""
    case = _recorded(x=None, outputs={}, error={"type": "AssertionError", "message": ""})
    with pytest.raises(CaseError, match="needs an input"):
        python_call(case.call, case.args, None)
    (row,) = replay([case])
    assert not row.bitwise and "CaseError" in row.note


def test_stricter_cases_pass_by_raising_value_error_only(tmp_path: Path) -> None:
    """A case where this port raises on purpose although Julia answers (a
    negative size) passes when it raises a ValueError, whatever Julia
    returned, and keeps its mark through a recording."""
    spec = next(case for case in CASES if case.stricter_than_julia and case.call == "RoPE")
    empty = {"cos_cached": np.zeros((0, 0), np.float32), "sin_cached": np.zeros((0, 0), np.float32)}
    cases = run_matrix([spec], run=lambda call, args, x: empty)
    save(tmp_path, {"package": "stand-in"}, cases)
    (loaded,) = load(tmp_path)[1]
    assert loaded.stricter_than_julia
    (row,) = replay([loaded])
    assert row.bitwise and "stricter" in row.note
    (row,) = replay([loaded], run=lambda call, args, x: empty)
    assert not row.bitwise


def test_neg_half_past_the_last_axis_replays_julia_s_bounds_error() -> None:
    """Julia 0.6.3's ``neg_half`` reads the halves with ``selectdim``,
    which raises a ``BoundsError`` for a ``dim`` past the last axis (its
    ``1:1`` is not ``1``): both raise there, so the case is not one where
    this port is stricter, and replays against Julia's error."""
    spec = next(
        case
        for case in CASES
        if case.call == "neg_half" and case.x is not None and case.args["dim"] > len(case.x.shape)
    )
    assert not spec.stricter_than_julia

    def julia_raises(call: str, args: Mapping[str, Any], x: np.ndarray | None) -> Any:
        raise bridge.JuliaCallError("BoundsError", "BoundsError: attempt to access ...")

    (case,) = run_matrix([spec], run=julia_raises)
    (row,) = replay([case])
    assert row.bitwise and case.error == {
        "type": "BoundsError",
        "message": "BoundsError: attempt to access ...",
    }


def test_inputs_replay_in_every_layout() -> None:
    """A runner right on contiguous inputs only, or one that writes into its
    input, is caught: the recorded input is replayed in C, F and strided
    layouts, each left as it was."""

    def contiguous_only(
        call: str, args: Mapping[str, Any], x: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        outputs = python_call(call, args, x)
        if x is not None and not (x.flags.c_contiguous or x.flags.f_contiguous):
            outputs["y"] = outputs["y"] + 1
        return outputs

    def in_place(call: str, args: Mapping[str, Any], x: np.ndarray | None) -> dict[str, np.ndarray]:
        outputs = python_call(call, args, x)
        if x is not None and x.flags.f_contiguous:
            x[0] = 0
        return outputs

    (row,) = replay([_recorded()], run=contiguous_only)
    assert not row.bitwise and "(in strided layout)" in row.note
    (row,) = replay([_recorded()], run=in_place)
    assert not row.bitwise and "modified its input (in F layout)" in row.note
    assert replay([_recorded()])[0].bitwise


def test_an_empty_recording_fails_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(fixtures, "load", lambda: ({"package": "stand-in"}, []))
    assert main(["report"]) == 1
    assert capsys.readouterr().err == "python -m parity report: the recording has no cases\n"


def test_paths_that_cannot_be_written_are_refused_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``record --out`` and ``report --output`` under a file: one line and
    exit 1 before the recording (once Julia has started) or the replay,
    not a traceback after minutes of it."""
    blocker = tmp_path / "a file"
    blocker.write_text("")

    def not_reached(*args: object) -> None:
        raise AssertionError("the work ran")

    monkeypatch.setattr(parity_main, "_start_julia", lambda command: True)
    monkeypatch.setattr(parity_record, "record", not_reached)
    monkeypatch.setattr(parity_report, "replay", not_reached)
    for argv, command in (
        (["record", "--out", str(blocker / "recording")], "record"),
        (["report", "--output", str(blocker / "report.md")], "report"),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"python -m parity {command}: ") and err.count("\n") == 1
        assert err.endswith(f"{blocker} is not a directory\n")
