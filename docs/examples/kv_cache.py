"""KV-cache decoding with RoPE offsets: one token at a time gives the same
rotated keys and queries as the whole sequence at once."""

from __future__ import annotations

import numpy as np

from positional_embeddings import RoPE


def main() -> None:
    head_dim, heads, steps = 64, 8, 12
    rope = RoPE(head_dim, 4096)
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((head_dim, steps, heads)).astype(np.float32)

    whole = rope(keys)  # positions 0 .. steps-1 at once
    cache = np.empty_like(whole)
    for position in range(steps):  # decoding: one new token per step
        token = keys[:, position : position + 1]  # (head_dim, 1, heads)
        rope(token, offset=position, out=cache[:, position : position + 1])  # into its slot

    print("bit-identical to the full pass:", np.array_equal(cache, whole))


if __name__ == "__main__":
    main()
