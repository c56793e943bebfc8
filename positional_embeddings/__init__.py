"""Bit-exact Python port of PositionalEmbeddings.jl v0.6.3, and more.

Rotary position embeddings on Julia's (head_size, seq_len, heads*batch)
layout, sinusoidal absolute embeddings on (seq_len, features, batch), and
attention masks, giving the same shapes, dtypes and bits as the Julia
package.  Array axes keep Julia's order: a Julia array of size (a, b, c) is a
numpy array of shape (a, b, c).

Beyond the Julia package (opt-in, never changing its defaults): RoPE
offsets, position ids, interleaved pairs and backward passes; layout
conversion between the pairings; learned, relative (Shaw, T5) and ALiBi
encodings.
"""

from ._version import __version__
from .absolute import AbsolutePE
from .alibi import alibi_bias, alibi_slopes
from .frequencies import compute_frequencies
from .layouts import half_to_interleaved, interleaved_to_half
from .learned import LearnedPE
from .masks import create_causal_mask, create_padding_mask
from .relative import RelativePE, relative_position_index, t5_relative_position_bucket
from .rope import RoPE, neg_half

__all__ = [
    "AbsolutePE",
    "LearnedPE",
    "RelativePE",
    "RoPE",
    "__version__",
    "alibi_bias",
    "alibi_slopes",
    "compute_frequencies",
    "create_causal_mask",
    "create_padding_mask",
    "half_to_interleaved",
    "interleaved_to_half",
    "neg_half",
    "relative_position_index",
    "t5_relative_position_bucket",
]
