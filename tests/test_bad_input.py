"""Bad input, as an adversary would send it: every case raises TypeError/ValueError/
MemoryError before any work, or gives the right answer; no input ever changes."""

from __future__ import annotations

import re
import warnings
from functools import partial

import numpy as np
import pytest

from positional_embeddings import (
    AbsolutePE,
    LearnedPE,
    RelativePE,
    RoPE,
    alibi_bias,
    alibi_slopes,
    compute_frequencies,
    create_causal_mask,
    create_padding_mask,
    half_to_interleaved,
    interleaved_to_half,
    neg_half,
    relative_position_index,
    t5_relative_position_bucket,
)

import reference
from comparisons import assert_bitwise_equal, peak_memory

ERRORS = (TypeError, ValueError, MemoryError)
BAD_SIZES = [-1, 2.0, True, np.bool_(True), None, "4", 1j, 2**70]
BAD_REALS = ["10", None, 1j, [10], True]
HUGE = 2**40

ROPE = RoPE(8, 10)
PE = AbsolutePE(8, 10)


def _x(shape, dtype=np.float32):
    return np.ones(shape, dtype=dtype)


def _masked(shape, dtype=np.float32):
    """A masked array with its first element masked (its mask would be dropped)."""
    mask = np.zeros(shape, bool)
    mask.flat[0] = True
    return np.ma.masked_array(np.ones(shape, dtype), mask=mask)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def constructor_cases():
    for bad in BAD_SIZES:
        yield f"RoPE head_size={bad!r}", RoPE, (bad, 10), {}
        yield f"RoPE seq_len={bad!r}", RoPE, (8, bad), {}
        yield f"AbsolutePE embedding_size={bad!r}", AbsolutePE, (bad, 10), {}
        yield f"AbsolutePE max_length={bad!r}", AbsolutePE, (8, bad), {}
        yield f"compute_frequencies dim={bad!r}", compute_frequencies, (bad, 10), {}
        yield f"create_causal_mask {bad!r}", create_causal_mask, (bad,), {}
        yield f"create_padding_mask max_len={bad!r}", create_padding_mask, ([1], bad), {}
        yield f"LearnedPE max_length={bad!r}", LearnedPE, (bad, 4), {}
        yield f"relative_position_index {bad!r}", relative_position_index, (bad, 3, 1), {}
        yield f"alibi_slopes {bad!r}", alibi_slopes, (bad,), {}
    for bad in BAD_REALS:
        yield f"RoPE base={bad!r}", RoPE, (8, 10), {"base": bad}
        yield f"RoPE scale={bad!r}", RoPE, (8, 10), {"scale": bad}
        yield f"AbsolutePE base={bad!r}", AbsolutePE, (8, 10), {"base": bad}
    for base in [0, 0.0, -1.0, -np.inf]:
        yield f"RoPE base={base}", RoPE, (8, 10), {"base": base}
        yield f"AbsolutePE base={base}", AbsolutePE, (8, 10), {"base": base}
    for scale in [np.inf, -np.inf, 1e308]:
        yield f"RoPE scale={scale}", RoPE, (8, 10), {"scale": scale}
    for T in [np.int64, np.complex64, object, "float32x", None, np.longdouble, "e4m3"]:
        yield f"RoPE T={T!r}", RoPE, (8, 10), {"T": T}
    yield "RoPE huge", RoPE, (HUGE, HUGE), {}
    yield "AbsolutePE huge", AbsolutePE, (HUGE, HUGE), {}
    yield "causal mask huge", create_causal_mask, (HUGE,), {}
    for size in (2**63, 2**64):  # beyond Julia's Int
        yield f"RoPE seq_len={size}", RoPE, (8, size), {}
        yield f"AbsolutePE embedding_size={size}", AbsolutePE, (size, 8), {}
        yield f"causal mask {size}", create_causal_mask, (size,), {}
        yield f"relative_position_index {size}", relative_position_index, (1, 1, size), {}
    yield "RoPE odd", RoPE, (7, 10), {}
    yield "AbsolutePE odd", AbsolutePE, (9, 10), {}
    yield "RoPE interleaved not bool", RoPE, (8, 10), {"interleaved": 1}
    yield "padding float lengths", create_padding_mask, ([1.5, 2.0], 3), {}
    yield "padding bool lengths", create_padding_mask, ([True], 3), {}
    yield "padding 2-D lengths", create_padding_mask, ([[1, 2]], 3), {}
    yield "padding empty", create_padding_mask, ([], 3), {}
    yield "padding None", create_padding_mask, (None, 3), {}
    yield "padding object lengths", create_padding_mask, ([2**70], 3), {}
    yield "t5 floats", t5_relative_position_bucket, (np.array([0.5]),), {}
    yield "alibi dtype", alibi_bias, (2, 3), {"dtype": np.int32}
    yield "alibi causal not bool", alibi_bias, (2, 3), {"causal": "yes"}
    yield "RelativePE negative", RelativePE, (-1, 4), {}
    yield "LearnedPE nan std", LearnedPE, (4, 4), {"std": np.nan}
    yield "LearnedPE infinite std", LearnedPE, (4, 4), {"std": np.inf}
    yield "RelativePE infinite std", RelativePE, (2, 4), {"std": float("inf")}
    yield "from_tables ints", RoPE.from_tables, (2, np.ones((2, 2), int), np.ones((2, 2), int)), {}
    yield "from_tables 3-D", RoPE.from_tables, (2, np.ones((2, 2, 1)), np.ones((2, 2, 1))), {}


def call_cases():
    for name, layer in (("rope", ROPE), ("pe", PE)):
        yield f"{name} 2-D", layer, (_x((8, 8)),), {}
        yield f"{name} 1-D", layer, (_x((8,)),), {}
        yield f"{name} 0-D", layer, (np.float32(1),), {}
        yield f"{name} None", layer, (None,), {}
        yield f"{name} string", layer, ("abc",), {}
        yield f"{name} complex", layer, (_x((8, 8, 1), np.complex64),), {}
        yield f"{name} object", layer, (np.ones((8, 8, 1), dtype=object),), {}
        yield f"{name} strings", layer, (np.full((8, 8, 1), "a"),), {}
        yield f"{name} datetime", layer, (np.zeros((8, 8, 1), "datetime64[s]"),), {}
        yield f"{name} ragged list", layer, ([[[1.0]], [[1.0, 2.0]]],), {}
        yield f"{name} masked", layer, (_masked((8, 8, 1)),), {}
        yield f"{name} out shape", layer, (_x((8, 8, 2)),), {"out": _x((8, 8, 3))}
        yield f"{name} out dtype", layer, (_x((8, 8, 2)),), {"out": _x((8, 8, 2), np.float64)}
        yield f"{name} out list", layer, (_x((8, 8, 2)),), {"out": [[0.0]]}
        yield f"{name} out read-only", layer, (_x((8, 8, 2)),), {"out": _read_only(_x((8, 8, 2)))}
        big = np.zeros((8, 8, 4), np.float32)
        yield f"{name} out partial overlap", layer, (big[:, :, :2],), {"out": big[:, :, 1:3]}
        one = np.zeros((8, 8, 1), np.float32)
        spread = np.lib.stride_tricks.as_strided(one, (8, 8, 3), (*one.strides[:2], 0))
        yield f"{name} out broadcast", layer, (_x((8, 8, 3)),), {"out": spread}
        yield f"{name} in place broadcast", layer, (spread,), {"out": spread}
        yield f"{name} out masked", layer, (_x((8, 8, 2)),), {"out": _masked((8, 8, 2))}
        yield f"{name} offset negative", layer, (_x((8, 8, 2)),), {"offset": -1}
        yield f"{name} offset float", layer, (_x((8, 8, 2)),), {"offset": 1.0}
        yield f"{name} offset past end", layer, (_x((8, 8, 2)),), {"offset": 3}
    yield "rope head mismatch", ROPE, (_x((6, 4, 1)),), {}
    yield "rope seq too long", ROPE, (_x((8, 11, 1)),), {}
    yield "rope positions out of range", ROPE, (_x((8, 3, 1)),), {"positions": [0, 1, 10]}
    yield "rope positions float", ROPE, (_x((8, 3, 1)),), {"positions": [0.0, 1.0, 2.0]}
    yield "rope positions shape", ROPE, (_x((8, 3, 2)),), {"positions": np.zeros((3, 3), int)}
    yield "rope backward 2-D", ROPE.backward, (_x((8, 4)),), {}
    yield "pe channel mismatch", PE, (_x((4, 6, 1)),), {}
    yield "pe seq too long", PE, (_x((11, 8, 1)),), {}
    yield "pe batch_first 4-D", PE, (_x((1, 4, 8, 1)),), {"batch_first": True}
    yield "pe batch_first not bool", PE, (_x((1, 4, 8)),), {"batch_first": "yes"}
    yield "neg_half dim 3", neg_half, (_x((2, 2, 2)), 3), {}
    yield "neg_half dim float", neg_half, (_x((2, 2, 2)), 0.0), {}
    yield "neg_half 0-d", neg_half, (np.float32(1),), {}
    yield "neg_half object", neg_half, (np.ones(3, dtype=object),), {}
    yield "neg_half masked", neg_half, (_masked((2, 2)),), {}
    yield "rope positions masked", ROPE, (_x((8, 3, 1)),), {"positions": _masked((3,), int)}
    yield (
        "rope positions with offset",
        ROPE,
        (_x((8, 3, 1)),),
        {"positions": [0, 1, 2], "offset": np.int64(1)},
    )
    yield (
        "rope positions with bool offset",
        ROPE,
        (_x((8, 3, 1)),),
        {"positions": [0, 1, 2], "offset": False},
    )
    yield "padding masked lengths", create_padding_mask, (_masked((2,), int), 3), {}
    yield "t5 masked", t5_relative_position_bucket, (_masked((3,), int),), {}
    yield "interleaved_to_half masked", interleaved_to_half, (_masked((6, 2)),), {}
    yield "from_tables masked", RoPE.from_tables, (2, _masked((2, 2)), _x((2, 2))), {}
    yield "LearnedPE.from_table masked", LearnedPE.from_table, (_masked((4, 2)),), {}
    swapped = _x((4, 2)).astype(">f4" if np.little_endian else "<f4")
    yield "LearnedPE.from_table other byte order", LearnedPE.from_table, (swapped,), {}
    yield "interleaved_to_half heads", interleaved_to_half, (_x((6, 2)),), {"heads": 4}
    yield "half_to_interleaved axis", half_to_interleaved, (_x((6, 2)),), {"axis": 2}


CASES = list(constructor_cases()) + list(call_cases())


def test_the_matrix_is_large():
    assert len(CASES) >= 100


@pytest.mark.parametrize("label,function,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_clearly_and_changes_nothing(label, function, args, kwargs):
    arrays = [a for a in list(args) + list(kwargs.values()) if isinstance(a, np.ndarray)]
    before = [a.copy() for a in arrays]
    with pytest.raises(ERRORS) as caught:
        function(*args, **kwargs)
    assert str(caught.value), "the error must say what was expected and what came"
    for array, copy in zip(arrays, before, strict=False):
        assert array.tobytes() == copy.tobytes()


SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e38, -1e-45], dtype=np.float32)


@pytest.mark.parametrize("layer", ["rope", "pe"])
def test_nan_and_inf_propagate_as_the_formula_says(layer):
    x = np.resize(SPECIAL, 8 * 7 * 2).reshape(8, 7, 2)
    x_view = x if layer == "rope" else x.transpose(1, 0, 2).copy()
    before = x_view.copy()
    if layer == "rope":
        expected = reference.rope_apply(x_view, ROPE.cos_cached, ROPE.sin_cached)
        actual = ROPE(x_view)
    else:
        expected = reference.absolute_apply(x_view, PE.embeddings)
        actual = PE(x_view)
    assert_bitwise_equal(actual, expected)
    assert_bitwise_equal(x_view, before)


@pytest.mark.parametrize(
    "make",
    [
        partial(RoPE, 8, 2**62),
        partial(RoPE, 2**62, 8),
        partial(AbsolutePE, 8, 2**62),
        partial(AbsolutePE, 2**62, 8),
        partial(compute_frequencies, 8, 2**62),
        partial(compute_frequencies, 2**62, 8),
        partial(compute_frequencies, 0, 2**62),  # no rows: numpy's strides would overflow
        partial(alibi_slopes, 2**62),
        partial(alibi_bias, 2, 2**40),
        partial(relative_position_index, 2**40, 2**40, 1),
        partial(RelativePE(2, 4), 2**31, 2**31),  # the index fits, the embeddings do not
        partial(RelativePE, 2**61, 4),
        partial(LearnedPE, 2**62, 8),
        partial(create_causal_mask, 2**40),
        partial(create_padding_mask, [1, 2], 2**62),
        partial(create_padding_mask, [1], 2**60),  # the mask fits, its positions do not
    ],
    ids=lambda make: f"{getattr(make.func, '__name__', type(make.func).__name__)}{make.args}",
)
def test_sizes_no_machine_could_hold_raise_memory_error_at_once(make):
    """Beyond 2**63 - 1 bytes numpy itself refuses an array with a ValueError
    ("array is too big") that names no argument; the size is refused first,
    as a MemoryError that names what it would have been."""
    with pytest.raises(MemoryError, match=r"of shape .* more than the 2\*\*63 - 1"):
        make()


def test_neg_half_of_bools_no_machine_could_hold_as_int64_raises_memory_error_at_once():
    """A broadcast bool input (which takes no memory) whose int64 result no
    machine could hold: a MemoryError naming the shape, not numpy's "array
    is too big".  (Other results take the input's itemsize, as the layout
    conversions' do: numpy holds the input, so it holds them.)"""
    x = np.broadcast_to(np.True_, (2**31, 2**31))
    with pytest.raises(MemoryError, match=r"of shape \(2147483648, 2147483648\) and dtype int64"):
        neg_half(x, 1)


@pytest.mark.parametrize("method", ["__call__", "backward"])
def test_an_output_no_machine_could_hold_is_refused_before_the_ids_are_read(method):
    """A broadcast input of 2**58 positions (which takes no memory) whose
    float32 output no machine could hold: refused at once, before reading
    its 2**58 position ids."""
    x = np.broadcast_to(np.zeros(1, np.bool_), (8, 2**58, 1))
    ids = np.broadcast_to(np.zeros(1, np.intp), (2**58,))
    with pytest.raises(MemoryError, match=r"the output of shape \(8, 288230376151711744, 1\)"):
        getattr(ROPE, method)(x, positions=ids)


def test_empty_results_whatever_the_other_sizes():
    """A result with no elements is made at once, however large its other
    axes or arguments: no frequency rows (Julia's ``theta * positions'`` is
    a 0×n matrix), no channels to split into heads."""
    frequencies = compute_frequencies(0, 2**40)
    assert frequencies.shape == (0, 2**40) and frequencies.dtype == np.float64
    for convert in (interleaved_to_half, half_to_interleaved):
        assert convert(np.zeros((0, 3), np.float32), heads=2**40).shape == (0, 3)


@pytest.mark.parametrize(
    "scalar, came", [(1.5, "float"), (np.float32(1.5), "float32"), (np.asarray(2.0), "a 0-d array")]
)
def test_layout_converters_name_a_scalar_they_were_given(scalar, came):
    for convert in (interleaved_to_half, half_to_interleaved):
        with pytest.raises(ValueError, match=f"^a must have at least 1 dimension, got {came}$"):
            convert(scalar)


def test_inputs_to_convert_are_checked_before_they_are_converted():
    """An input the loops read converted (an array in the other byte order, an
    integer gradient) is checked before the copy is made: here inputs no
    machine could copy (4 TiB), of the wrong head size or channel count."""
    huge = (8 + 1, 2**40, 1)
    swapped = np.broadcast_to(np.zeros(1, ">f4"), huge)
    integers = np.broadcast_to(np.zeros(1, np.int32), huge)
    with pytest.raises(ValueError, match="Head dimension must match, expected 8, got 9"):
        ROPE(swapped)
    with pytest.raises(ValueError, match="Head dimension must match, expected 8, got 9"):
        ROPE.backward(swapped)
    with pytest.raises(ValueError, match="Head dimension must match, expected 8, got 9"):
        ROPE.backward(integers)
    with pytest.raises(ValueError, match="Channel dimension must match embedding size"):
        PE(swapped.transpose(1, 0, 2))
    with pytest.raises(ValueError, match="Channel dimension must match embedding size"):
        LearnedPE(10, 8).backward(swapped.transpose(1, 0, 2))


def test_infinities_in_gradients_and_tables_neither_warn_nor_raise():
    """As in the forward passes, an infinity or a NaN that comes out of the
    formula comes out silently, whatever numpy's error state: a gradient
    summed over the batch (inf + -inf is NaN), a table drawn with a standard
    deviation beyond its dtype's range (infinite entries)."""
    dy = np.array([[[np.inf, -np.inf], [np.inf, 1.0]]], np.float32)  # (seq, features, batch)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        _, grad = LearnedPE(4, 2, seed=0).backward(dy)
        tables = [
            LearnedPE(4, 2, std=1e300, seed=0).embeddings,
            RelativePE(2, 2, std=1e300, seed=0).embeddings,
            RelativePE(2, 2, std=1e10, seed=0, dtype=np.float16).embeddings,
        ]
    assert np.isnan(grad[0, 0]) and grad[0, 1] == np.inf and not grad[1:].any()
    for table in tables:
        assert np.isinf(table).all()


@pytest.mark.parametrize("layer", ["rope", "pe"])
def test_broadcast_and_read_only_inputs_work(layer):
    function = ROPE if layer == "rope" else PE
    if layer == "rope":  # one value per head channel, repeated over (seq, batch)
        zero_stride = np.broadcast_to(np.arange(8, dtype=np.float32)[:, None, None], (8, 5, 3))
    else:  # one value per position, repeated over (channel, batch)
        zero_stride = np.broadcast_to(np.arange(5, dtype=np.float32)[:, None, None], (5, 8, 3))
    read_only = _read_only(np.ascontiguousarray(zero_stride))
    expected = function(np.ascontiguousarray(zero_stride))
    assert_bitwise_equal(function(zero_stride), expected)
    assert_bitwise_equal(function(read_only), expected)
    negative = np.ascontiguousarray(zero_stride)[::-1, ::-1, ::-1]
    assert_bitwise_equal(function(negative), function(np.ascontiguousarray(negative)))


def test_errors_name_the_arguments_of_the_call():
    """The backward pass's errors about ``out`` name its ``dy``, not an
    ``x`` it does not take; AbsolutePE's infinite angles name no ``scale``,
    which it does not take."""
    dy = np.zeros((8, 3, 2), np.float32)
    for out, error, match in [
        (np.zeros((8, 3, 2), np.float64), TypeError, r"Julia's promotion of dy's float32 "),
        (np.zeros((8, 3, 1), np.float32), ValueError, r"out must have shape \(8, 3, 2\) like dy,"),
        (dy[:, ::-1], ValueError, r"out overlaps dy without being dy itself; pass out=dy "),
    ]:
        with pytest.raises(error, match=match):
            ROPE.backward(dy, out=out)
    with pytest.raises(ValueError, match=r"the angles \(positions × frequencies\) overflow"):
        AbsolutePE(4, 3, base=0)
    with pytest.raises(ValueError, match=r"the angles \(positions × frequencies × scale\)"):
        RoPE(4, 3, base=0)


@pytest.mark.parametrize("layer", ["rope", "pe"])
def test_out_in_the_other_byte_order_is_refused_as_such(layer):
    """An ``out`` of the right type in the other byte order (which the loops
    cannot write) is refused saying so: the error said float32 was wanted
    and '>f4' came, as if the two were other types."""
    function = ROPE if layer == "rope" else PE
    x = np.zeros((8, 8, 2), np.float32)
    swapped = x.astype(x.dtype.newbyteorder())
    with pytest.raises(TypeError, match=r"^out must have dtype float32 in the machine's byte "):
        function(x, out=swapped)
    came = rf"got float32 in the other byte order \({swapped.dtype.str!r}\)$"
    with pytest.raises(TypeError, match=came):
        function(x, out=swapped)
    assert not swapped.any()


@pytest.mark.parametrize("make", [partial(LearnedPE, 4, 2), partial(RelativePE, 2, 4)])
@pytest.mark.parametrize(
    "seed, error", [(-1, ValueError), (1.5, TypeError), ("abc", TypeError), ([1, -2], ValueError)]
)
def test_a_bad_seed_is_named(make, seed, error):
    """numpy's errors for a seed it cannot take name no argument."""
    with pytest.raises(error, match=r"^seed must be None, a non-negative integer .*, got "):
        make(seed=seed)


ID_TAKERS = [
    pytest.param(
        lambda ids: ROPE(np.ones((8, len(ids), 1), np.float32), positions=ids),
        "positions",
        id="RoPE",
    ),
    pytest.param(
        lambda ids: AbsolutePE(8, 12)(np.ones((len(ids), 8, 1), np.float32), positions=ids),
        "positions",
        id="AbsolutePE",
    ),
    pytest.param(lambda ids: create_padding_mask(ids, 3), "lengths", id="create_padding_mask"),
    pytest.param(lambda ids: t5_relative_position_bucket(ids), "relative_position", id="t5_bucket"),
]
"""Calls of one list of integers each, and the name their errors give it."""


@pytest.mark.parametrize("call, name", ID_TAKERS)
@pytest.mark.parametrize(
    "ids", [[2**63, -1], [2**70, 3], (3, -(2**64)), [2**64 - 1], [2**64 - 1, 1], [2**63, 1]]
)
def test_integers_beyond_64_bits_are_named_as_such(call, name, ids):
    """Python ints beyond int64, Julia's ``Int`` (numpy makes them uint64
    when alone, float64 or objects beside others), are refused as out of
    range, naming the one furthest from 0: the error said the ints were no
    integers, of a dtype never passed, and a lone one was taken as uint64
    where two were refused."""
    furthest = max(ids, key=abs)
    with pytest.raises(ValueError, match=rf"^{name} must fit in int64, got {furthest}$"):
        call(ids)


@pytest.mark.parametrize("call, name", ID_TAKERS)
@pytest.mark.parametrize("ids", [[np.int8(1), np.uint64(2), 0], (np.uint64(3), np.int16(1))])
def test_integers_of_no_common_integer_dtype_are_taken_as_int64(call, name, ids):
    """Integers of numpy's types in a list that no one integer dtype holds
    (``uint64`` beside signed ones), which numpy makes float64, are taken
    as the same Python ints are: the error said they were no integers, of
    a dtype never passed."""
    expected = call([int(i) for i in ids])
    got = call(ids)
    np.testing.assert_array_equal(got, expected, err_msg=name)
    assert got.dtype == expected.dtype


def test_uint64_arrays_of_ids_are_taken_as_they_are():
    """An ndarray keeps its own dtype: uint64 lengths beyond int64 are
    lengths beyond every position (no padding)."""
    lengths = np.array([2**64 - 1, 1], np.uint64)
    np.testing.assert_array_equal(
        create_padding_mask(lengths, 2)[0], [[False, False], [False, True]]
    )


@pytest.mark.parametrize(
    "call",
    [ROPE, AbsolutePE(8, 12), neg_half],
    ids=["RoPE", "AbsolutePE", "neg_half"],
)
@pytest.mark.parametrize("wide", [-(2**70), 2**63 + 1])
def test_inputs_of_integers_beyond_64_bits_are_named_as_such(call, wide):
    """``x`` as Python ints that no 64-bit integer holds together (numpy
    makes them objects, or float64 where uint64 holds one and int64 the
    rest, rounding it): out of range, never passed on as objects or rounded
    floats."""
    x = np.ones((8, 2, 1), np.int64).tolist()
    x[0][1][0], x[1][0][0] = wide, -1
    with pytest.raises(ValueError, match=rf"^x must fit in 64-bit integers, got {wide}$"):
        call(x)


class _ArrayLike:
    """An object numpy reads through ``__array__`` (as a torch tensor)."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


def test_array_likes_are_not_read_as_python_numbers():
    """Only Python sequences and ints can hold ints beyond 64 bits: an
    array-like of floats is taken as numpy reads it, never element by
    element as Python objects (24 bytes a float, and slow)."""
    x = np.zeros((64, 1000, 8))
    _, peak = peak_memory(lambda: neg_half(_ArrayLike(x)))
    assert peak < 2 * x.nbytes  # the result and a negated half: no 24-byte objects


def test_tables_and_layouts_of_integers_beyond_64_bits_are_refused():
    """The same for every array_like read as numbers: a learned table, a
    converter's input."""
    wide = [[2**63 + 1, -1]]
    with pytest.raises(
        ValueError, match=rf"^embeddings must fit in 64-bit integers, got {wide[0][0]}$"
    ):
        LearnedPE.from_table(wide)
    with pytest.raises(ValueError, match=rf"^a must fit in 64-bit integers, got {wide[0][0]}$"):
        interleaved_to_half(wide)


_TAKE_ARRAYS = {
    "RoPE": (lambda bad: ROPE(bad), "x"),
    "RoPE.backward": (lambda bad: ROPE.backward(bad), "dy"),
    "AbsolutePE": (lambda bad: PE(bad), "x"),
    "LearnedPE.backward": (lambda bad: LearnedPE(10, 8).backward(bad), "dy"),
    "neg_half": (lambda bad: neg_half(bad), "x"),
    "cos_cached": (lambda bad: RoPE.from_tables(2, bad, np.ones((2, 2))), "cos_cached"),
    "sin_cached": (lambda bad: RoPE.from_tables(2, np.ones((2, 2)), bad), "sin_cached"),
    "from_table": (lambda bad: LearnedPE.from_table(bad), "embeddings"),
    "positions": (lambda bad: ROPE(_x((8, 3, 1)), positions=bad), "positions"),
    "AbsolutePE positions": (lambda bad: PE(_x((3, 8, 1)), positions=bad), "positions"),
    "LearnedPE positions": (
        lambda bad: LearnedPE(10, 8)(_x((3, 8, 1)), positions=bad),
        "positions",
    ),
    "LearnedPE.backward positions": (
        lambda bad: LearnedPE(10, 8).backward(_x((3, 8, 1)), positions=bad),
        "positions",
    ),
    "create_padding_mask": (lambda bad: create_padding_mask(bad, 3), "lengths"),
    "relative_position": (lambda bad: t5_relative_position_bucket(bad), "relative_position"),
    "interleaved_to_half": (lambda bad: interleaved_to_half(bad), "a"),
    "half_to_interleaved": (lambda bad: half_to_interleaved(bad), "a"),
}
"""Calls that take an array, and the name their errors give it."""


@pytest.mark.parametrize("call, name", list(_TAKE_ARRAYS.values()), ids=list(_TAKE_ARRAYS))
def test_ragged_lists_are_named(call, name):
    """numpy's error for a list it cannot make an array of names no
    argument."""
    with pytest.raises(ValueError, match=rf"^{name} could not be read as an array: "):
        call([[1, 2], [3]])


_NOT_NUMBERS = [
    (None, "NoneType"),
    ("abc", "str"),
    ({"a": 1}, "dict"),
    (object(), "object"),
    ([[["a"]]], "list (read as dtype <U1)"),
    ([[[None]]], "list (read as dtype object)"),
]
"""Values that are no array of numbers, and how an error names what came:
their type, not the dtype numpy reads a scalar of them as."""


_OF_INTEGERS = {
    "positions": "integers",
    "lengths": "integers (Julia's Vector{Int})",
    "relative_position": "integers",
}
"""What the arrays of integers must be arrays of, in their errors."""


@pytest.mark.parametrize(
    "call, name, bad, came",
    [
        pytest.param(call, name, bad, came, id=f"{label}-{came}")
        for label, (call, name) in _TAKE_ARRAYS.items()
        for bad, came in _NOT_NUMBERS
        if not (bad is None and name == "positions")  # None: the default, no ids
    ],
)
def test_what_is_no_array_of_numbers_is_named_by_its_type(call, name, bad, came):
    """numpy makes a 0-d object or string array of None or a string, whose
    dtype ("got object") did not say what the caller passed."""
    of = _OF_INTEGERS.get(name, "numbers")
    expected = rf"^{name} must be an array of {re.escape(of)}, got {re.escape(came)}$"
    with pytest.raises(TypeError, match=expected):
        call(bad)


@pytest.mark.parametrize("layer", [RoPE, AbsolutePE])
def test_a_pickled_state_without_its_table_names_what_came(layer):
    state = layer(8, 4).__getstate__()
    table = "cos_cached" if layer is RoPE else "embeddings"
    state[table] = None
    made = layer.__new__(layer)
    with pytest.raises(TypeError, match=rf"^{table} must be an array of numbers, got NoneType$"):
        made.__setstate__(state)


@pytest.mark.parametrize(
    "sin_cached",
    ["no table", np.zeros((8, 5), np.float32), np.zeros((8, 10**6), np.float64)],
    ids=["not an array", "another shape", "another dtype"],
)
def test_from_tables_checks_both_tables_before_copying_either(sin_cached):
    """A bad ``sin_cached`` is refused before the 32 MB ``cos_cached`` is
    copied (the copy came first, and the dtype check ran on the copies)."""
    cos = np.zeros((8, 10**6), np.float32)

    def refused() -> None:
        with pytest.raises((TypeError, ValueError), match="sin_cached"):
            RoPE.from_tables(8, cos, sin_cached)

    _, peak = peak_memory(refused)
    assert peak < cos.nbytes // 4


@pytest.mark.parametrize(
    "call",
    [
        lambda offset: ROPE(np.ones((8, 1, 1), np.float32), offset=offset),
        lambda offset: ROPE.backward(np.ones((8, 1, 1), np.float32), offset=offset),
        lambda offset: AbsolutePE(8, 12)(np.ones((1, 8, 1), np.float32), offset=offset),
    ],
    ids=["RoPE", "RoPE.backward", "AbsolutePE"],
)
@pytest.mark.parametrize("offset", [2**64, np.uint64(2**64 - 1), 2**63])
def test_offsets_beyond_julia_s_int_say_so_whatever_their_type(call, offset):
    """An offset that Julia's ``Int`` cannot hold is refused as such, a
    Python int as a numpy one (the Python int said the sequence ran past
    the tables)."""
    with pytest.raises(ValueError, match=r"^offset must be at most 2\*\*63 - 1"):
        call(offset)
