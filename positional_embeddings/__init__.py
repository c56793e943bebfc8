"""Bit-exact Python port of PositionalEmbeddings.jl v0.6.3.

Rotary position embeddings on Julia's (head_size, seq_len, heads*batch)
layout, sinusoidal absolute embeddings on (seq_len, features, batch), and
attention masks, giving the same shapes, dtypes and bits as the Julia
package.  Array axes keep Julia's order: a Julia array of size (a, b, c) is a
numpy array of shape (a, b, c).
"""

from ._version import __version__
from .absolute import AbsolutePE
from .frequencies import compute_frequencies
from .masks import create_causal_mask, create_padding_mask
from .rope import RoPE, neg_half

__all__ = [
    "AbsolutePE",
    "RoPE",
    "__version__",
    "compute_frequencies",
    "create_causal_mask",
    "create_padding_mask",
    "neg_half",
]
