"""The Julia docs' RoPE multi-head attention, in numpy with positional_embeddings.

Same layout as the Julia example: activations are (d_model, seq, batch);
heads are split into (head_dim, seq, num_heads*batch) with Julia's
column-major reshapes (``order="F"``); attention scores are laid out
(key, query, num_heads*batch) and normalised over the keys (axis 0).
"""

from __future__ import annotations

import numpy as np

from positional_embeddings import RoPE, create_causal_mask, create_padding_mask


def split_heads(x: np.ndarray, head_dim: int, num_heads: int) -> np.ndarray:
    """(d_model, seq, batch) -> (head_dim, seq, num_heads*batch), as Julia's split_heads."""
    _d_model, seq, batch = x.shape
    heads = x.reshape(head_dim, num_heads, seq, batch, order="F").transpose(0, 2, 1, 3)
    return heads.reshape(head_dim, seq, num_heads * batch, order="F")


def join_heads(x: np.ndarray, head_dim: int, num_heads: int, batch: int) -> np.ndarray:
    """(head_dim, seq, num_heads*batch) -> (d_model, seq, batch), as Julia's join_heads."""
    seq = x.shape[1]
    heads = x.reshape(head_dim, seq, num_heads, batch, order="F").transpose(0, 2, 1, 3)
    return heads.reshape(head_dim * num_heads, seq, batch, order="F")


def softmax(scores: np.ndarray, axis: int = 0) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


class RoPEMultiHeadAttention:
    """Multi-head self-attention with rotary embeddings on queries and keys."""

    def __init__(self, d_model: int, num_heads: int, maxlen: int = 1000, seed: int = 0) -> None:
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        rng = np.random.default_rng(seed)
        std = np.sqrt(2.0 / d_model)  # kaiming_normal, as in the Julia example
        self.Wq, self.Wk, self.Wv, self.Wo = (
            rng.normal(0.0, std, (d_model, d_model)).astype(np.float32) for _ in range(4)
        )
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.scale = np.float32(np.sqrt(self.head_dim))
        self.rope = RoPE(self.head_dim, maxlen)

    def project(self, W: np.ndarray, x: np.ndarray) -> np.ndarray:
        d_model, seq, batch = x.shape
        flat = W @ x.reshape(d_model, seq * batch, order="F")
        return split_heads(
            flat.reshape(d_model, seq, batch, order="F"), self.head_dim, self.num_heads
        )

    def __call__(self, x: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
        """x: (d_model, seq, batch); keep: where a (key, query, column) score counts."""
        d_model, seq, batch = x.shape
        q = self.rope(self.project(self.Wq, x))
        k = self.rope(self.project(self.Wk, x))
        v = self.project(self.Wv, x)
        scores = np.einsum("hkc,hqc->kqc", k, q / self.scale)  # (key, query, heads*batch)
        if keep is not None:
            scores = np.where(keep, scores, -np.inf)
        probs = softmax(scores, axis=0)
        attended = np.einsum("hkc,kqc->hqc", v, probs)  # batched_mul(v, probs)
        out = join_heads(attended, self.head_dim, self.num_heads, batch)
        flat = self.Wo @ out.reshape(d_model, seq * batch, order="F")
        return flat.reshape(d_model, seq, batch, order="F")


def attention_mask(lengths: list[int], seq: int, num_heads: int) -> np.ndarray:
    """Scores to keep, (key, query, num_heads*batch): causal, and no padded key.

    ``create_causal_mask(seq)[k, q]`` is true for keys ``k <= q``;
    ``create_padding_mask(lengths, seq)[0, p, b]`` is true for padding.
    """
    causal = create_causal_mask(seq)  # (seq, seq, 1)
    padded_key = create_padding_mask(lengths, seq).transpose(1, 0, 2)  # (seq, 1, batch)
    keep = causal & ~padded_key  # (key, query, batch)
    return np.repeat(keep, num_heads, axis=2)  # heads vary fastest, as in split_heads


def main() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 20, 32)).astype(np.float32)  # as in the Julia docs
    mha = RoPEMultiHeadAttention(512, 8)
    y = mha(x, attention_mask([20] * 16 + [12] * 16, 20, 8))
    print("output", y.shape, y.dtype, f"mean |y| = {np.abs(y).mean():.4f}")


if __name__ == "__main__":
    main()
