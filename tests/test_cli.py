"""python -m positional_embeddings: the tour, plot, usage errors and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from positional_embeddings.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def test_tour_prints_the_julia_examples(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "RoPE(64, 1024)" in out and "shape (64, 100, 256), dtype float32" in out
    assert "AbsolutePE(512, 1000)" in out and "shape (100, 512, 32), dtype float32" in out
    assert "combined = causal .| padding" in out and "(5, 5, 2)" in out
    assert "sha256" in out


def test_tour_checksum_is_stable(capsys):
    main(["tour"])
    first = capsys.readouterr().out
    main(["tour"])
    second = capsys.readouterr().out
    digests = [line.split()[-1] for line in first.splitlines() if "sha256" in line]
    assert digests and digests == [
        line.split()[-1] for line in second.splitlines() if "sha256" in line
    ]


@pytest.mark.parametrize("kind,options", [("absolute", ["--embedding-size", "16"]), ("rope", [])])
def test_plot_writes_a_figure(tmp_path, kind, options, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / f"{kind}.svg"
    assert main(["plot", kind, *options, "-o", str(target)]) == 0
    assert target.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("argv", [["nonsense"], ["plot"], ["plot", "absolute"], ["--bad-flag"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kind,options,name",
    [
        ("absolute", ["--embedding-size", "3"], "figure.svg"),
        ("absolute", ["--embedding-size", "-2"], "figure.svg"),
        ("absolute", ["--base", "-5"], "figure.svg"),
        ("absolute", ["--embedding-size", "0"], "figure.svg"),
        ("rope", ["--head-size", "3"], "figure.svg"),
        ("rope", ["--seq-len", "0"], "figure.svg"),
        ("rope", [], "figure.xyz"),
        ("rope", [], "new/figure.xyz"),
    ],
)
def test_plot_options_the_figure_refuses_are_usage_errors(tmp_path, kind, options, name, capsys):
    """Sizes, bases or file types the figure refuses (sizes that draw
    nothing among them): usage of ``plot KIND``, exit 2, one line saying
    why (no traceback), no file, no folder."""
    pytest.importorskip("matplotlib")
    with pytest.raises(SystemExit) as caught:
        main(["plot", kind, *options, "-o", str(tmp_path / name)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: python -m positional_embeddings plot {kind} ")
    assert f"\npython -m positional_embeddings plot {kind}: error: " in err
    assert not any(tmp_path.iterdir())


def test_plot_to_a_file_that_cannot_be_written_fails_in_one_line(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    blocker = tmp_path / "a file"
    blocker.write_text("")
    assert main(["plot", "rope", "-o", str(blocker / "new" / "figure.svg")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m positional_embeddings plot: ") and err.count("\n") == 1
    assert err.endswith(f"{blocker} is not a directory\n")


def test_plot_without_a_suffix_says_which_file_it_wrote(tmp_path, capsys):
    """Matplotlib writes PNG and adds ``.png`` to a name without a suffix:
    the command names that file, not the name it was given."""
    pytest.importorskip("matplotlib")
    assert main(["plot", "rope", "-o", str(tmp_path / "figure")]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'figure.png'}\n"
    assert [path.name for path in tmp_path.iterdir()] == ["figure.png"]


@pytest.mark.parametrize("name", ["", "."])
def test_plot_to_a_directory_fails_in_one_line(tmp_path, monkeypatch, name, capsys):
    """A directory (or no name) is no file to write: a failure, one line,
    before any work (matplotlib wrote ``<directory>.png`` beside it)."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    for target in (name, str(tmp_path)):
        assert main(["plot", "rope", "-o", target]) == 1
        err = capsys.readouterr().err
        assert "is not a file name" in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir()) and not any(tmp_path.parent.glob("*.png"))


def test_plot_to_a_missing_directory_s_name_writes_nothing(tmp_path, capsys):
    """A trailing slash names a directory, whether it exists or not: no
    ``<name>.png`` beside it, nothing made."""
    pytest.importorskip("matplotlib")
    assert main(["plot", "rope", "-o", f"{tmp_path / 'new' / 'folder'}/"]) == 1
    assert "is not a file name" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_plot_to_a_device_without_a_suffix_writes_no_file_beside_it(tmp_path, capsys):
    """An existing file that is no regular file (a FIFO here, as
    ``/dev/null``), named without a suffix: matplotlib would add ``.png``
    and write a new file beside the device."""
    pytest.importorskip("matplotlib")
    fifo = tmp_path / "device"
    os.mkfifo(fifo)
    assert main(["plot", "rope", "-o", str(fifo)]) == 1
    err = capsys.readouterr().err
    assert "is not a regular file" in err and err.count("\n") == 1
    assert [path.name for path in tmp_path.iterdir()] == ["device"]


def test_a_figure_that_fails_to_write_leaves_no_file_and_no_folder(tmp_path, monkeypatch, capsys):
    """Matplotlib's writers can fail after the folders are made and the
    file begun (PGF without LaTeX raises ``RuntimeError``): exit 1, one
    line, and neither is left behind."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def fails_midway(figure, target, **options):
        Path(target).write_text("half a figure")
        raise RuntimeError("'xelatex' not found")

    monkeypatch.setattr(Figure, "savefig", fails_midway)
    assert main(["plot", "absolute", "-o", str(tmp_path / "new" / "deeper" / "x.pgf")]) == 1
    err = capsys.readouterr().err
    assert err == "python -m positional_embeddings plot: 'xelatex' not found\n"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kind,option", [("rope", "--seq-len"), ("absolute", "--max-length")])
@pytest.mark.parametrize("size", ["99999999999", str(2**62)])
def test_plot_of_a_size_no_memory_holds_fails_in_one_line(tmp_path, kind, option, size, capsys):
    """Tables this machine cannot hold (numpy's MemoryError), or no machine
    (the package's): a failure, one line, no traceback, no file."""
    pytest.importorskip("matplotlib")
    assert main(["plot", kind, option, size, "-o", str(tmp_path / "figure.svg")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m positional_embeddings plot: ") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def _status(argv):
    """What ``main(argv)`` returns, or the status it exits with (argparse's)."""
    try:
        return main(argv)
    except SystemExit as exit:
        return exit.code


@pytest.mark.parametrize("command", ["bench", "parity"])
def test_bench_and_parity_hand_every_option_over(command, capfd, monkeypatch):
    """Options after ``bench`` and ``parity`` are theirs (``--help`` here),
    not the tour's; their usage and errors name the command they were
    given as (``parity`` runs in an interpreter of its own: its output is
    the process's)."""
    monkeypatch.chdir(ROOT)
    for option, status, stream in (("--help", 0, "out"), ("--no-such-option", 2, "err")):
        assert _status([command, option]) == status
        text = getattr(capfd.readouterr(), stream)
        assert text.startswith(f"usage: python -m positional_embeddings {command} ")
    assert f"python -m positional_embeddings {command}: error: " in text


def test_parity_through_the_command_starts_julia_before_numba_loads(tmp_path):
    """``python -m positional_embeddings parity`` has loaded Numba, which
    must come after Julia (both load LLVM): the parity tool runs in a new
    interpreter, where juliacall (a stand-in here, which fails to load)
    is imported with no Numba loaded."""
    (tmp_path / "juliacall").mkdir()
    flag = tmp_path / "numba loaded"
    (tmp_path / "juliacall" / "__init__.py").write_text(
        "import pathlib, sys\n"
        f"pathlib.Path({str(flag)!r}).write_text(str('numba' in sys.modules))\n"
        "raise ImportError('a stand-in for juliacall')\n"
    )
    julia = tmp_path / "julia"
    julia.write_text("#!/bin/sh\nexit 1\n")
    julia.chmod(0o755)
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHON_JULIACALL_EXE", "PYTHON_JULIAPKG_EXE")
    }
    result = subprocess.run(
        [sys.executable, "-m", "positional_embeddings", "parity", "record", "--out", "recorded"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **environment,
            "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        },
        timeout=300,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("python -m positional_embeddings parity record: Julia at ")
    assert "a stand-in for juliacall" in result.stderr
    assert flag.read_text() == "False"
    assert not (tmp_path / "recorded").exists()


@pytest.mark.parametrize("command,usage", [("bench", "benchmarks"), ("parity", "parity")])
def test_bench_and_parity_run_the_checkouts_own_tools(tmp_path, command, usage):
    """From another project's directory that has a ``benchmarks`` (or
    ``parity``) package of its own, ``bench`` and ``parity`` still run this
    checkout's tools, never the project's."""
    own = tmp_path / usage
    own.mkdir()
    (own / "__init__.py").write_text("")
    (own / "__main__.py").write_text("print('the other project ran')\n")
    result = subprocess.run(
        [sys.executable, "-m", "positional_embeddings", command, "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(f"usage: python -m positional_embeddings {command} ")


def test_module_runs_as_a_command():
    result = subprocess.run(
        [sys.executable, "-m", "positional_embeddings", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0
    for command in ("tour", "bench", "parity", "plot"):
        assert command in result.stdout


_REPORT_OF_TWO_CASES = (
    "import runpy, parity.fixtures as f; header, cases = f.load(); "
    "f.load = lambda: (header, cases[:2]); runpy.run_module('parity', run_name='__main__')"
)
"""``python -m parity report`` on the recording's first two cases."""


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "positional_embeddings"],
        ["-m", "benchmarks", "--quick", "--repeat", "1", "--cases", "tables"],
        ["-c", _REPORT_OF_TWO_CASES, "report"],
    ],
    ids=["tour", "benchmarks", "parity report"],
)
def test_output_cut_short_ends_without_a_traceback(command):
    """``python -m positional_embeddings | head -1``, and the same with the
    benchmark's table or the parity report (cut short as ``less`` quit
    before they print): exit code 1, no traceback."""
    process = subprocess.Popen(
        [sys.executable, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None and process.stderr is not None
    if command[1] == "positional_embeddings":
        assert process.stdout.readline().startswith(b"positional_embeddings")
    process.stdout.close()
    assert process.wait(timeout=300) == 1
    assert b"Traceback" not in process.stderr.read()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_output_to_a_full_disk_fails_in_one_line():
    """Standard output that cannot be written (``/dev/full``): exit code 1,
    one line naming the command and the error, no traceback."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "positional_embeddings"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    assert (result.returncode, result.stderr.count("\n")) == (1, 1)
    assert result.stderr.startswith("python -m positional_embeddings: error: [Errno 28]")


def test_plot_where_matplotlib_cannot_start_fails_in_one_line(tmp_path):
    """A ``MPLBACKEND`` matplotlib does not know fails its import: exit 1, one
    line saying so (not a usage error: the command line was right)."""
    pytest.importorskip("matplotlib")
    result = subprocess.run(
        [sys.executable, "-m", "positional_embeddings", "plot", "rope", "-o", "figure.svg"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "no-such-backend"},
        timeout=120,
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("python -m positional_embeddings plot: matplotlib cannot start")
    assert not any(tmp_path.iterdir())
