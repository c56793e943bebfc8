"""The documentation's examples run, and give what they claim."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from positional_embeddings import RoPE

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def attention():
    return load("attention")


def loop_attention(mha, x, keep):
    """The same layer head by head, batch by batch, without any reshape trick."""
    d_model, seq, batch = x.shape
    hd, heads = mha.head_dim, mha.num_heads
    y = np.empty((d_model, seq, batch))
    for b in range(batch):
        q_all, k_all, v_all = (W @ x[:, :, b] for W in (mha.Wq, mha.Wk, mha.Wv))
        outputs = []
        for h in range(heads):
            rows = slice(h * hd, (h + 1) * hd)
            q = mha.rope(q_all[rows][:, :, None])[:, :, 0]
            k = mha.rope(k_all[rows][:, :, None])[:, :, 0]
            scores = k.T @ (q / mha.scale)  # (key, query)
            scores = np.where(keep[:, :, b * heads + h], scores, -np.inf)
            probs = np.exp(scores - scores.max(axis=0))
            probs /= probs.sum(axis=0)
            outputs.append(v_all[rows] @ probs)
        y[:, :, b] = mha.Wo @ np.concatenate(outputs)
    return y


def test_attention_matches_a_head_by_head_loop(attention):
    mha = attention.RoPEMultiHeadAttention(16, 4, maxlen=32, seed=3)
    x = np.random.default_rng(4).standard_normal((16, 6, 3)).astype(np.float32)
    keep = attention.attention_mask([6, 4, 1], 6, 4)
    np.testing.assert_allclose(mha(x, keep), loop_attention(mha, x, keep), rtol=2e-4, atol=2e-5)


def test_attention_never_looks_at_the_future_or_at_padding(attention):
    mha = attention.RoPEMultiHeadAttention(16, 2, maxlen=32, seed=5)
    x = np.random.default_rng(6).standard_normal((16, 8, 2)).astype(np.float32)
    keep = attention.attention_mask([8, 5], 8, 2)
    y = mha(x, keep)
    changed = x.copy()
    changed[:, 6:, 0] += 10.0  # the future of positions 0..5 in sequence 0
    changed[:, 5:, 1] -= 10.0  # the padding of sequence 1 (length 5)
    y2 = mha(changed, keep)
    np.testing.assert_array_equal(y2[:, :6, 0], y[:, :6, 0])
    np.testing.assert_array_equal(y2[:, :5, 1], y[:, :5, 1])


def test_split_and_join_heads_are_inverse_and_julia_ordered(attention):
    x = np.arange(24.0).reshape(6, 2, 2, order="F")  # d_model 6 = 3 heads of 2
    heads = attention.split_heads(x, 2, 3)
    assert heads.shape == (2, 2, 6)
    np.testing.assert_array_equal(heads[:, :, 1], x[2:4, :, 0])  # head 2 of batch 1 (Julia)
    np.testing.assert_array_equal(heads[:, :, 3], x[0:2, :, 1])
    np.testing.assert_array_equal(attention.join_heads(heads, 2, 3, 2), x)


def test_examples_run_as_scripts(capsys):
    load("attention").main()
    load("kv_cache").main()
    out = capsys.readouterr().out
    assert "output (512, 20, 32) float32" in out
    assert "bit-identical to the full pass: True" in out


def test_kv_cache_claim_directly():
    rope = RoPE(64, 4096)
    keys = np.random.default_rng(0).standard_normal((64, 12, 8)).astype(np.float32)
    steps = [rope(keys[:, p : p + 1], offset=p) for p in range(12)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=1), rope(keys))


def test_every_example_is_shown_in_the_docs():
    """Each example file reaches the site through a snippet line that
    pymdownx.snippets reads (``--8<-- "path"``); a line mangled by a code
    formatter (``--8 < --"path"``) is shown as text instead, and the build
    does not notice."""
    docs = EXAMPLES.parent
    text = "\n".join(page.read_text(encoding="utf-8") for page in docs.glob("*.md"))
    snippet_like = re.findall(r"^-+\s*8\s*<.*$", text, flags=re.M)
    included = re.findall(r'^--8<-- "([^"]+)"$', text, flags=re.M)
    assert len(included) == len(snippet_like), snippet_like
    for path in included:  # docs/generated is written when the site is built
        assert path.startswith("docs/generated/") or (docs.parent / path).is_file(), path
    for example in EXAMPLES.glob("*.py"):
        assert f"docs/examples/{example.name}" in included, example.name
