"""``python -m positional_embeddings``: a tour of the Julia docs' examples, and tools.

Commands: ``tour`` (the default), ``bench``, ``parity`` and ``plot``; see
``--help``.

Each example runs on a deterministic input that Julia can rebuild exactly
(``reshape(Float32.(1:n) ./ n, dims)``), and prints the result's shape,
dtype, sum, and the SHA-256 of its bytes in Julia's column-major order, so a
Julia session can check the same figures::

    using PositionalEmbeddings, SHA
    x = reshape(Float32.(1:64*100*256) ./ (64*100*256), 64, 100, 256)
    bytes2hex(sha256(reinterpret(UInt8, vec(RoPE(64, 1024)(x)))))
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import AbsolutePE, RoPE, __version__, create_causal_mask, create_padding_mask
from ._output import exit_with

__all__ = ["main"]


def _ramp(*shape: int) -> np.ndarray:
    """Julia's ``reshape(Float32.(1:n) ./ n, shape...)``, column-major."""
    n = int(np.prod(shape))
    values = np.arange(1, n + 1, dtype=np.float32) / np.float32(n)
    return values.reshape(shape, order="F")


def _describe(array: np.ndarray, seconds: float) -> str:
    digest = hashlib.sha256(array.tobytes(order="F")).hexdigest()
    total = float(array.sum(dtype=np.float64))
    return (
        f"  -> shape {array.shape}, dtype {array.dtype}, sum {total:.9g} "
        f"({seconds * 1e3:.1f} ms, including any compilation)\n"
        f"     sha256 of its column-major bytes: {digest}"
    )


def tour() -> None:
    """Run the Julia docs' usage examples and print what they return."""
    print(f"positional_embeddings {__version__}: the examples of PositionalEmbeddings.jl")
    print("Inputs are Julia's reshape(Float32.(1:n) ./ n, dims...); the same calls in Julia")
    print("give the same sha256: bytes2hex(sha256(reinterpret(UInt8, vec(y)))) with SHA.jl.\n")

    start = time.perf_counter()
    rope = RoPE(64, 1024)
    x = _ramp(64, 100, 256)  # (head_size, seq_len, nheads*batch) = 8 heads x 32 batch
    y = rope(x)
    print("rope = RoPE(64, 1024); rope(x) with x of size (64, 100, 256)")
    print(_describe(y, time.perf_counter() - start))

    start = time.perf_counter()
    pe = AbsolutePE(512, 1000)
    x = _ramp(100, 512, 32)  # (seq_len, features, batch)
    y = pe(x)
    print("\npe = AbsolutePE(512, 1000); pe(x) with x of size (100, 512, 32)")
    print(_describe(y, time.perf_counter() - start))

    causal = create_causal_mask(5)
    padding = create_padding_mask([3, 4], 5)
    combined = causal | padding
    print("\ncausal = create_causal_mask(5)                  # size", causal.shape)
    print("padding = create_padding_mask([3, 4], 5)        # size", padding.shape)
    print("combined = causal .| padding                    # size", combined.shape)
    for b in range(combined.shape[2]):
        print(f"  combined[:, :, {b}] (Julia's [:, :, {b + 1}]):")
        for row in combined[:, :, b].astype(int):
            print("    " + " ".join(map(str, row)))


_CHECKOUT_TOOLS = {"bench": "benchmarks", "parity": "parity"}
"""Commands that hand the rest of the command line, options included, to
``python -m <package>`` of a source checkout."""


def _run_checkout_tool(name: str, argv: list[str]) -> int:
    """Run command ``name``'s ``python -m <package>`` (``benchmarks``,
    ``parity``) of the source checkout this package was imported from:
    never a package of that name elsewhere on the path (another project's
    ``benchmarks`` in the current directory, say); its usage and errors
    name the command.  ``parity`` runs in a new interpreter (Julia first).
    Outside a checkout, or where the tool cannot be imported, one line on
    stderr and exit 1."""
    package = _CHECKOUT_TOOLS[name]
    command = f"python -m positional_embeddings {name}"
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / package / "__main__.py").is_file():
        print(
            f"{command}: the {package} tool ships with the source checkout, not the "
            "installed package; install the checkout (pip install -e .) or run this "
            "from its root",
            file=sys.stderr,
        )
        return 1
    if package == "parity":
        # Julia must start before Numba loads (both load LLVM), and this
        # process has loaded Numba: the tool runs in an interpreter of its own.
        launcher = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from parity.__main__ import run; run(sys.argv[3:], sys.argv[2])"
        )
        return subprocess.call([sys.executable, "-c", launcher, str(checkout), command, *argv])
    sys.path.insert(0, str(checkout))
    try:
        module = importlib.import_module(f"{package}.__main__")
    except ImportError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 1
    finally:
        sys.path.remove(str(checkout))
    if Path(module.__file__ or "").resolve().parent.parent != checkout:
        print(
            f"{command}: the {package!r} already imported is not the checkout's "
            f"({module.__file__}); run it as python -m {package} from {checkout}",
            file=sys.stderr,
        )
        return 1
    return int(module.main(argv, prog=command) or 0)


def _plot(args: argparse.Namespace) -> int:
    """Draw the figure; sizes or a file type the figure refuses are usage
    errors (exit 2, with the usage of ``plot KIND``), a missing matplotlib,
    tables larger than memory holds, a file that cannot be written or a
    format whose tools are missing (PGF's LaTeX) a failure (exit 1), each one
    line, no traceback."""
    from .plots import plot_absolute, plot_rope

    try:
        if args.kind == "absolute":
            path = plot_absolute(args.output, args.embedding_size, args.max_length, args.base)
        else:
            path = plot_rope(args.output, args.head_size, args.seq_len, args.base)
    except (ImportError, MemoryError, OSError, RuntimeError) as error:
        print(f"python -m positional_embeddings plot: {error}", file=sys.stderr)
        return 1
    except (TypeError, ValueError) as error:
        args.kind_parser.error(str(error))
    print(f"wrote {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m positional_embeddings",
        description="Bit-exact Python port of PositionalEmbeddings.jl. "
        "Without a command: a tour of the Julia docs' examples.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("tour", help="run the Julia docs' examples and print their results")
    for name, summary in (
        ("bench", "the benchmark table (python -m benchmarks [options]; from a source checkout)"),
        (
            "parity",
            "the parity report against Julia (python -m parity ...; from a source checkout)",
        ),
    ):
        commands.add_parser(name, help=summary, add_help=False)  # main() hands them over
    plot = commands.add_parser("plot", help="draw a figure (needs matplotlib)")
    kinds = plot.add_subparsers(dest="kind", metavar="KIND", required=True)
    absolute = kinds.add_parser("absolute", help="heatmap of AbsolutePE's embeddings")
    absolute.add_argument(
        "--embedding-size", type=int, default=128, help="rows of the table (default: 128)"
    )
    absolute.add_argument(
        "--max-length", type=int, default=100, help="positions drawn (default: 100)"
    )
    rope = kinds.add_parser("rope", help="RoPE's rotation frequencies")
    rope.add_argument("--head-size", type=int, default=64, help="even (default: 64)")
    rope.add_argument("--seq-len", type=int, default=256, help="positions drawn (default: 256)")
    for sub in (absolute, rope):
        sub.add_argument(
            "--base", type=float, default=10_000, help="of the frequencies (default: 10000)"
        )
        sub.add_argument(
            "-o",
            "--output",
            required=True,
            help="file to write (.svg, .png, .pdf); missing folders are made",
        )
        sub.set_defaults(kind_parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 success, 1 failure, 2 usage)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in _CHECKOUT_TOOLS:
        return _run_checkout_tool(arguments[0], arguments[1:])
    parser = _parser()
    args = parser.parse_args(arguments)
    if args.command == "plot":
        return _plot(args)
    tour()
    return 0


if __name__ == "__main__":
    exit_with(main, "python -m positional_embeddings")
