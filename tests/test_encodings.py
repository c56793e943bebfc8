"""Learned, relative (Shaw, T5) and ALiBi encodings against slow references."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial

import numpy as np
import pytest

from positional_embeddings import (
    LearnedPE,
    RelativePE,
    _kernels,
    alibi_bias,
    alibi_slopes,
    learned,
    relative_position_index,
    t5_relative_position_bucket,
)

import reference
from comparisons import (
    assert_bitwise_equal,
    assert_every_way_of_writing,
    peak_memory,
    refuse_checked_path,
)
from test_rope import INPUT_DTYPES, layouts, runs_recorded, sample, stored

# --- learned -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INPUT_DTYPES)
@pytest.mark.parametrize("table_dtype", [np.float32, np.float64])
def test_learned_forward_matches_reference(dtype, table_dtype):
    pe = LearnedPE(9, 6, seed=1, dtype=table_dtype)
    x = sample((5, 6, 3), dtype, seed=41)
    expected = reference.absolute_apply(x, pe.embeddings.T)
    for _, view in layouts(x):
        assert_bitwise_equal(pe(view), expected)
    assert_bitwise_equal(pe(x[:2], offset=7), reference.absolute_apply(x[:2], pe.embeddings[7:9].T))
    batch_first = np.ascontiguousarray(x.transpose(2, 0, 1))
    assert_bitwise_equal(pe(batch_first, batch_first=True), expected.transpose(2, 0, 1))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("table_dtype", [np.float32, np.float64])
def test_learned_in_julias_order_lays_its_table_out_tile_by_tile(monkeypatch, threads, table_dtype):
    """LearnedPE's table is position-major ((max_len, d), read as (d,
    max_len)): in Julia's order its calls take the plane loop at any
    sequence length, which lays the table out a tile at a time; sequences
    and channels that are no multiple of a tile, offsets, ``out=``, in place,
    on one thread or split over two: the oracle's bits."""
    runs = runs_recorded(monkeypatch, threads)
    pe = LearnedPE(400, 37, seed=0, dtype=table_dtype)
    for seq, offset in ((300, 0), (33, 17), (2, 398)):
        x = np.asfortranarray(sample((seq, 37, 3), table_dtype, seed=seq))
        expected = reference.absolute_apply(x, pe.embeddings[offset : offset + seq].T)
        runs.clear()
        assert_every_way_of_writing(partial(pe, offset=offset), x, expected)
        assert {run.kernel for run in runs} == {_kernels._absolute_planes}


def test_learned_initialisation_and_training_in_place():
    pe = LearnedPE(2000, 64, seed=0)
    assert pe.embeddings.shape == (2000, 64) and pe.embeddings.dtype == np.float32
    assert abs(pe.embeddings.std() - 0.02) < 1e-3 and abs(pe.embeddings.mean()) < 1e-3
    assert_bitwise_equal(LearnedPE(2000, 64, seed=0).embeddings, pe.embeddings)
    pe.embeddings[:] = 1.0
    assert pe(np.zeros((3, 64, 1), np.float32))[0, 0, 0] == 2.0 - 1.0


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("batch_first", [False, True, np.False_, np.True_])
def test_learned_decoding_steps_take_the_direct_path(monkeypatch, order, batch_first):
    """GPT-2's decoding loop: after a first checked call of each kind
    (allocating, with ``out``, in place), steps of the same layout skip the
    checks (``batch_first`` a Python or a numpy bool), with the same bits
    and outputs in ``x``'s memory order; a step beyond the table still goes
    to the checks (which raise)."""
    pe = LearnedPE(40, 16, seed=5)
    x = np.asarray(sample((5, 1, 16) if batch_first else (1, 16, 5), np.float32, 6), order=order)

    def expected(position):
        row = pe.embeddings[position : position + 1].T
        if batch_first:
            return reference.absolute_apply(x.transpose(1, 2, 0), row).transpose(2, 0, 1)
        return reference.absolute_apply(x, row)

    step = partial(pe, batch_first=batch_first)
    assert_every_way_of_writing(partial(step, offset=39), x, expected(39))
    monkeypatch.setattr(learned, "add_embeddings", refuse_checked_path)
    for position in (7, 0, 38):
        assert_every_way_of_writing(partial(step, offset=position), x, expected(position))
        assert step(x, offset=position).flags[f"{order}_CONTIGUOUS"]
    with pytest.raises(AssertionError, match="checked path"):
        step(x, offset=40)


# numpy 2.5 deprecates setting an array's shape or dtype; users still can.
@pytest.mark.filterwarnings("ignore:Setting the (shape|dtype) on a NumPy array:DeprecationWarning")
def test_learned_decoding_steps_read_the_table_as_it_is_now(monkeypatch):
    """A remembered step reads the table trained in place; a table replaced,
    or reshaped or retyped in place, is checked again (and remembered anew):
    retyped to what an assigned table may not be, calls and their backward
    passes refuse it as assigning it does."""
    checked = []
    add = learned.add_embeddings
    monkeypatch.setattr(
        learned, "add_embeddings", lambda *a, **k: checked.append(1) or add(*a, **k)
    )
    pe = LearnedPE(40, 16, seed=7)
    x = sample((1, 16, 5), np.float32, seed=8)

    def steps(count):
        """``count`` steps at position 3, each checked; how many went through the checks."""
        before = len(checked)
        for _ in range(count):
            expected = reference.absolute_apply(x, pe.embeddings[3:4].T)
            assert_bitwise_equal(pe(x, offset=3), expected)
        return len(checked) - before

    assert steps(3) == 1
    pe.embeddings *= 2  # trained in place
    assert steps(2) == 0
    pe.embeddings = pe.embeddings[::-1]  # replaced by another array (a view)
    assert steps(2) == 1
    pe.embeddings = pe.embeddings.astype(np.float64)
    assert steps(2) == 1
    pe.embeddings.dtype = np.float32  # the same memory read as twice the channels
    with pytest.raises(ValueError, match="expected 32, got 16"):
        pe(x, offset=3)
    pe.embeddings.dtype = np.float64
    assert steps(2) == 1
    for retyped, error in [
        (np.int64, "the dtype of embeddings must be np.float32 or np.float64"),
        (np.float16, "the dtype of embeddings must be np.float32 or np.float64"),
        (np.dtype(">f8"), "byte order"),  # read as it is: sums of byte-swapped values
    ]:
        pe.embeddings.dtype = retyped  # checked again, as a table assigned is
        with pytest.raises(TypeError, match=error):
            pe(x, offset=3)
        with pytest.raises(TypeError, match=error):
            pe.backward(x, offset=3)
        pe.embeddings.dtype = np.float64
        assert steps(2) == 0  # laid out as the remembered calls read it
    pe.embeddings.shape = (20, 32)  # the same memory as 32 channels
    with pytest.raises(ValueError, match="expected 32, got 16"):
        pe(x, offset=3)


def test_learned_table_assigned_during_a_call_is_what_later_calls_read(monkeypatch):
    """A table assigned while another thread's call is under way (forced
    here between the call's read of the table and its remembering of the
    loop): that call may give the old table's sums, every later one gives
    the new table's, in the layout that call remembered and in others."""
    old, new = np.zeros((16, 4), np.float32), np.ones((16, 4), np.float32)
    pe = LearnedPE.from_table(old)
    x = sample((3, 4, 2), np.float32, seed=1)
    add = learned.add_embeddings

    def assigned_meanwhile(*args, **kwargs):
        y = add(*args, **kwargs)
        pe.embeddings = new
        return y

    monkeypatch.setattr(learned, "add_embeddings", assigned_meanwhile)
    assert_bitwise_equal(pe(x), reference.absolute_apply(x, old[:3].T))
    monkeypatch.setattr(learned, "add_embeddings", add)
    assert pe.embeddings is new
    for later in [x, x, sample((3, 4, 5), np.float32, seed=2)]:
        assert_bitwise_equal(pe(later), reference.absolute_apply(later, new[:3].T))


@pytest.mark.filterwarnings("ignore:Setting the (shape|dtype) on a NumPy array:DeprecationWarning")
def test_learned_table_assigned_while_one_reshaped_in_place_is_checked_again(monkeypatch):
    """A table assigned while another thread's call checks the table it
    read, reshaped in place since, again: the assignment holds (the call
    does not put back the table it checked), and later calls of the call's
    layout read it."""
    old, new = np.zeros((16, 4), np.float32), np.ones((8, 8), np.float32)
    pe = LearnedPE.from_table(old)
    x = sample((3, 4, 2), np.float32, seed=1)
    pe(x)
    old.shape = (8, 8)
    checked = learned._checked
    calls = []

    def assigned_meanwhile(table):
        calls.append(table)
        if len(calls) == 1:
            pe.embeddings = new
        return checked(table)

    monkeypatch.setattr(learned, "_checked", assigned_meanwhile)
    wide = sample((3, 8, 2), np.float32, seed=2)
    assert_bitwise_equal(pe(wide), reference.absolute_apply(wide, old[:3].T))
    monkeypatch.setattr(learned, "_checked", checked)
    assert calls[0] is old and pe.embeddings is new
    for _ in range(2):
        assert_bitwise_equal(pe(wide), reference.absolute_apply(wide, new[:3].T))


class Subclass(np.ndarray):
    """An ndarray subclass, which ``out`` may be."""


@pytest.mark.parametrize("out_type", [np.ndarray, Subclass])
@pytest.mark.parametrize("in_place", [True, False])
def test_learned_output_in_the_table_it_reads(in_place, out_type):
    """An ``out`` that is part of the table (training a table in place, rows
    shifted), an ndarray or a subclass, gets the sums of the table as it was
    before the call, as numpy and Julia's ``broadcast!`` give, also after a
    call of the same layout was remembered."""
    table = np.arange(60, dtype=np.float32).reshape(10, 6)
    pe = LearnedPE.from_table(table)
    warm = np.ones((3, 6, 1), np.float32)
    pe(warm, out=warm if in_place else np.empty_like(warm))  # remembered for this layout
    x = table[1:4, :, None] if in_place else np.ones((3, 6, 1), np.float32)
    expected = x + table[:3, :, None]
    out = (x if in_place else table[1:4, :, None]).view(out_type)
    assert pe(x, out=out) is out
    assert_bitwise_equal(out, expected)
    assert_bitwise_equal(table[:1], np.arange(6, dtype=np.float32)[None])  # rows not written


def test_learned_backward():
    pe = LearnedPE(10, 4, dtype=np.float64, seed=2)
    dy = np.random.default_rng(3).standard_normal((3, 4, 2, 5))
    dx, dtable = pe.backward(dy, offset=6)
    assert_bitwise_equal(dx, dy)
    assert dx is not dy
    assert dtable.shape == (10, 4)
    np.testing.assert_array_equal(dtable[:6], 0)
    np.testing.assert_allclose(dtable[6:9], dy.sum(axis=(2, 3)), rtol=1e-12)
    np.testing.assert_array_equal(dtable[9:], 0)
    _, batch_first = pe.backward(
        np.ascontiguousarray(dy[..., 0].transpose(2, 0, 1)), batch_first=True
    )
    np.testing.assert_allclose(batch_first[:3], dy[..., 0].sum(axis=2), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("table_dtype", [np.float32, np.float64])
def test_learned_backward_same_bits_in_every_layout(dtype, table_dtype):
    """The table's gradient, a sum over the batch axes, has the same bits
    whatever ``dy``'s memory order: numpy's sum of the C-contiguous
    (seq, features, batch...) array (summed in Julia's order, with the
    batch axes outermost, numpy adds one batch column after another, and
    the last bits differ)."""
    pe = LearnedPE(10, 4, dtype=table_dtype, seed=5)
    dy = (100 * np.random.default_rng(43).standard_normal((5, 4, 1000))).astype(dtype)
    wide = table_dtype if np.dtype(dtype).kind == "i" else np.promote_types(dtype, table_dtype)
    expected = np.zeros((10, 4), table_dtype)
    expected[2:7] = dy.sum(axis=2, dtype=wide)
    for _, view in [*layouts(dy), ("seq last", stored(dy, (1, 2, 0)))]:
        assert_bitwise_equal(pe.backward(view, offset=2)[1], expected)
        batch_first = view.transpose(2, 0, 1)
        assert_bitwise_equal(pe.backward(batch_first, offset=2, batch_first=True)[1], expected)
    four = dy.reshape(5, 4, 40, 25)
    expected[2:7] = four.sum(axis=(2, 3), dtype=wide)
    for _, view in layouts(four):
        assert_bitwise_equal(pe.backward(view, offset=2)[1], expected)


def test_learned_backward_sums_a_wider_gradient_before_rounding():
    """A float64 ``dy`` of a float32 table is summed in float64 and rounded
    once, as autograd does: rounded term by term, 1e8 + 1 and -1e8 summed to
    0; and a float32 ``dy`` of a float64 table is summed in float64."""
    pe = LearnedPE.from_table(np.zeros((4, 1), np.float32))
    dy = np.array([1e8 + 1, -1e8]).reshape(1, 1, 2)
    _, grad = pe.backward(dy)
    assert grad.dtype == np.float32 and grad[0, 0] == 1.0
    wide = LearnedPE.from_table(np.zeros((4, 1), np.float64))
    third = np.full((1, 1, 3), 1 / 3, np.float32)
    assert wide.backward(third)[1][0, 0] == np.float64(third[0, 0, 0]) * 3


def test_learned_backward_sums_integer_gradients_exactly():
    """Integer and bool ``dy`` are summed exactly, then rounded once to the
    table's type: summed in float32, 2**24 + 1 + 1 gave 2**24.  Sums that
    int64 cannot hold are taken in float64, never wrapped around."""
    pe = LearnedPE.from_table(np.zeros((2, 1), np.float32))
    for dtype in (np.int64, np.uint32):
        dy = np.array([2**24, 1, 1], dtype).reshape(1, 1, 3)
        assert pe.backward(dy)[1][0, 0] == 2**24 + 2
    flags = np.ones((1, 1, 3), bool)
    assert pe.backward(flags)[1][0, 0] == 3.0
    huge = np.full((1, 1, 4), 2**62, np.int64)
    _, grad = pe.backward(huge)
    assert grad.dtype == np.float32 and grad[0, 0] == np.float32(2.0**64)
    wide = LearnedPE.from_table(np.zeros((2, 1), np.float64))
    for terms in (np.array([2**63 - 1, 2**63 - 1]), np.array([2**64 - 1, 1], np.uint64)):
        assert wide.backward(terms.reshape(1, 1, 2))[1][0, 0] == 2.0**64


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_learned_backward_same_bits_in_the_other_byte_order(dtype):
    """``dy`` read from a big-endian file gives the table's gradient of the
    same values in the machine's order bit for bit, over a batch longer than
    numpy's casting buffer (8192 elements), which would split the sum."""
    pe = LearnedPE(4, 2, seed=0)
    dy = (100 * np.random.default_rng(44).standard_normal((2, 2, 20000))).astype(dtype)
    swapped = dy.astype(dy.dtype.newbyteorder())
    dx, grad = pe.backward(swapped)
    assert_bitwise_equal(grad, pe.backward(dy)[1])
    assert dx.dtype == dy.dtype and np.array_equal(dx, dy)


def test_learned_backward_batch_first_takes_three_dims():
    pe = LearnedPE(10, 4)
    message = (
        r"^dy must be \(batch, seq_len, features\) with batch_first=True, got shape \(2, 3, 4, 5\)$"
    )
    with pytest.raises(ValueError, match=message):
        pe.backward(np.zeros((2, 3, 4, 5)), batch_first=True)
    with pytest.raises(ValueError, match=message.replace("dy", "x", 1)):
        pe(np.zeros((2, 3, 4, 5)), batch_first=True)


@pytest.mark.parametrize("make", [LearnedPE, RelativePE])
def test_a_fraction_std_is_read_as_numpy_reads_it(make):
    """Julia has no trained tables: a fraction ``std`` is rounded once, as
    numpy's ``normal`` and torch read it, not as Julia's ``Rational``
    (numerator and denominator each rounded first, which differ here)."""
    std = Fraction(2**54 + 3, 3 * 2**53)
    assert float(std) != float(std.numerator) / float(std.denominator)
    drawn = make(8, 8, std=std, seed=0, dtype=np.float64).embeddings
    assert_bitwise_equal(drawn, make(8, 8, std=float(std), seed=0, dtype=np.float64).embeddings)


def test_learned_errors():
    for dtype in (np.float16, np.int32, None):  # trained tables: float32 or float64 only
        # No Julia type names: Julia has no such layer.
        with pytest.raises(TypeError, match=r"^dtype must be np.float32 or np.float64, got "):
            LearnedPE(4, 4, dtype=dtype)
    with pytest.raises(
        TypeError, match=r"the dtype of embeddings must be np\.float32 or np\.float64, got"
    ):
        LearnedPE.from_table(np.zeros((4, 2), np.float16))
    with pytest.raises(ValueError, match="std"):
        LearnedPE(4, 4, std=-1)
    with pytest.raises(ValueError, match="Channel dimension"):
        LearnedPE(4, 4)(np.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match="exceeds maximum length"):
        LearnedPE(4, 4)(np.zeros((5, 4, 1)))
    with pytest.raises(ValueError, match="shape"):
        LearnedPE.from_table(np.zeros(4))
    table = np.ones((3, 2))
    assert LearnedPE.from_table(table).embeddings is table


def test_learned_table_assigned_is_checked_and_sizes_follow_it():
    """``pe.embeddings = table`` takes the same checks as ``from_table`` and
    holds the array itself; ``max_length`` and ``embedding_size`` (and the
    backward pass's checks) follow the table the layer holds."""
    pe = LearnedPE(40, 16, seed=3)
    longer = np.arange(80.0 * 8).reshape(80, 8)
    pe.embeddings = longer
    assert pe.embeddings is longer
    assert (pe.max_length, pe.embedding_size) == (80, 8)
    assert repr(pe) == "LearnedPE(max_length=80, embedding_size=8)"
    dy = np.random.default_rng(4).standard_normal((2, 8, 3))
    dx, dtable = pe.backward(dy, offset=70)
    assert_bitwise_equal(dx, dy)
    assert dtable.shape == (80, 8)
    assert_bitwise_equal(dtable[70:72], dy.sum(axis=2))
    pe.embeddings = longer[:20]
    with pytest.raises(ValueError, match="exceeds maximum length: dy has seq_len 2 from"):
        pe.backward(dy, offset=70)
    with pytest.raises(ValueError, match="exceeds maximum length: x has seq_len 2 from"):
        pe(dy, offset=70)
    for bad, error, match in [
        (np.zeros((4, 2), np.int64), TypeError, "the dtype of embeddings must be np.float32 or"),
        (np.zeros(4), ValueError, "must be \\(max_length, embedding_size\\), got shape \\(4,\\)"),
        (np.zeros((4, 2), ">f8"), TypeError, "byte order"),
    ]:
        with pytest.raises(error, match=match):
            pe.embeddings = bad
        assert pe.embeddings.shape == (20, 8)  # kept
    with pytest.raises(AttributeError):
        pe.max_length = 5


# --- relative (Shaw) -----------------------------------------------------------------


@pytest.mark.parametrize("lq,lk,k", [(3, 4, 1), (6, 6, 2), (1, 9, 0), (0, 3, 2), (7, 2, 10)])
def test_relative_index_matches_loop(lq, lk, k):
    expected = np.array(
        [[min(max(j - i, -k), k) + k for j in range(lk)] for i in range(lq)], dtype=np.int64
    ).reshape(lq, lk)
    assert_bitwise_equal(relative_position_index(lq, lk, k), expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relative_embeddings_gather_the_table(dtype):
    rel = RelativePE(3, 5, seed=4, dtype=dtype)
    assert rel.embeddings.shape == (7, 5)
    gathered = rel(4, 9)
    assert gathered.shape == (4, 9, 5) and gathered.dtype == dtype
    assert_bitwise_equal(gathered, rel.embeddings[relative_position_index(4, 9, 3)])


def test_relative_embeddings_of_no_features_build_no_index():
    """With ``embedding_size`` 0 the result is empty whatever the lengths:
    it comes without the (length_q, length_k) int64 index (128 MB here)."""
    rel = RelativePE(1, 0, seed=0, dtype=np.float64)
    gathered, peak = peak_memory(lambda: rel(4000, 4000))
    assert gathered.shape == (4000, 4000, 0) and gathered.dtype == np.float64
    assert peak < 2**20


@pytest.mark.parametrize("make", [RelativePE, LearnedPE])
def test_learned_tables_check_their_dtype_before_drawing_the_table(make):
    """A bad ``dtype`` is refused before any work: before the table, here one
    no machine could hold (which would raise a MemoryError instead)."""
    with pytest.raises(TypeError, match=r"^dtype must be np.float"):
        make(2**40, 2**20, dtype=np.int32)
    with pytest.raises(
        TypeError, match=r"^dtype must be np.float16, np.float32 or np.float64, got"
    ):
        RelativePE(3, 5, dtype=np.int32)


# numpy 2.5 deprecates setting an array's shape; users still can.
@pytest.mark.filterwarnings("ignore:Setting the shape on a NumPy array:DeprecationWarning")
def test_relative_table_assigned_is_checked_and_sizes_follow_it():
    """``rel.embeddings = table`` holds the array itself once it is a 2-D
    float table of 2k + 1 rows; the sizes follow it and cannot be assigned
    apart from it (a clipping distance beyond the table read other memory)."""
    rel = RelativePE(2, 4, seed=0)
    table = np.arange(7.0 * 3).reshape(7, 3)
    rel.embeddings = table
    assert rel.embeddings is table
    assert (rel.max_relative_position, rel.embedding_size) == (3, 3)
    assert_bitwise_equal(rel(5, 9), table[relative_position_index(5, 9, 3)])
    for bad, error, match in [
        (np.zeros((1, 4)).reshape(2, 2), ValueError, r"2k \+ 1 rows .* got shape \(2, 2\)"),
        (np.zeros(5), ValueError, r"must be \(2k \+ 1, embedding_size\), got shape \(5,\)"),
        (np.zeros((5, 2), np.int32), TypeError, "the dtype of embeddings must be np.float16"),
        (np.zeros((5, 2), ">f4"), TypeError, "byte order"),
        (np.zeros((5, 2), object), TypeError, "the dtype of embeddings"),
        (np.ma.zeros((5, 2)), TypeError, "masked"),
    ]:
        with pytest.raises(error, match=match):
            rel.embeddings = bad
        assert rel.embeddings is table  # kept
    for name in ("max_relative_position", "embedding_size"):
        with pytest.raises(AttributeError):
            setattr(rel, name, 10**6)
    table.shape = (3, 7)  # reshaped in place: 3 rows (k = 1), 7 columns
    assert_bitwise_equal(rel(2, 3), table[relative_position_index(2, 3, 1)])
    table.shape = (21,)
    with pytest.raises(ValueError, match=r"got shape \(21,\)"):
        rel(2, 3)


def test_relative_index_clipping_distance_fits_int64():
    """Indices reach 2k: a k whose 2k is beyond int64 is refused, not wrapped."""
    largest = (2**63 - 1) // 2
    assert relative_position_index(1, 2, largest).tolist() == [[largest, largest + 1]]
    for k in (largest + 1, 2**63 - 1, 2**63):
        with pytest.raises(ValueError, match=f"at most {largest}, got {k}"):
            relative_position_index(1, 1, k)


# --- T5 buckets ----------------------------------------------------------------------


def t5_reference(relative, bidirectional, num_buckets, max_distance):
    """Hugging Face's T5Attention._relative_position_bucket, one value at a time."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if relative > 0 else 0
        n = abs(relative)
    else:
        n = -min(relative, 0)
    exact = num_buckets // 2
    if n < exact:
        return bucket + n
    large = np.float32(np.log(np.float32(n) / np.float32(exact)))
    large = large / np.float32(math.log(max_distance / exact)) * np.float32(num_buckets - exact)
    return bucket + min(exact + int(large), num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_match_reference(bidirectional, num_buckets, max_distance):
    relative = np.arange(-300, 301)
    expected = [t5_reference(r, bidirectional, num_buckets, max_distance) for r in relative]
    actual = t5_relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(actual, expected)
    grid = np.arange(5)[None, :] - np.arange(4)[:, None]
    assert t5_relative_position_bucket(grid).shape == (4, 5)


def test_t5_buckets_keep_the_memory_order_and_take_no_positions():
    """Buckets of a (query, key) grid in F order, or of a strided view, come
    in that memory order (they came in C order); an empty list, which numpy
    reads as float64, gives no buckets, as an empty integer array does."""
    grid = np.arange(6)[None, :] - np.arange(5)[:, None]
    expected = t5_relative_position_bucket(grid)
    for view in (np.asfortranarray(grid), np.asfortranarray(grid)[:, ::-2], grid[::2]):
        buckets = t5_relative_position_bucket(view)
        assert buckets.strides == np.empty_like(view).strides
        np.testing.assert_array_equal(buckets, t5_relative_position_bucket(view.copy()))
    assert t5_relative_position_bucket(np.asfortranarray(grid)).flags.f_contiguous
    np.testing.assert_array_equal(t5_relative_position_bucket(grid.T), expected.T)
    for empty in ([], np.zeros((0, 3), np.int32)):
        buckets = t5_relative_position_bucket(empty)
        assert buckets.shape == np.shape(empty) and buckets.dtype == np.int64


def test_t5_errors():
    with pytest.raises(TypeError, match="integers"):
        t5_relative_position_bucket(np.array([1.5]))
    with pytest.raises(ValueError, match="max_distance"):
        t5_relative_position_bucket(np.array([1]), num_buckets=32, max_distance=4)
    for num_buckets, bidirectional in ((3, True), (1, False)):
        fewest = 4 if bidirectional else 2
        with pytest.raises(
            ValueError, match=rf"at least 2 buckets per direction \(num_buckets >= {fewest}"
        ):
            t5_relative_position_bucket([1], bidirectional, num_buckets)
    t5_relative_position_bucket([1], True, 4, 2)  # the fewest: one exact bucket per direction
    t5_relative_position_bucket([1], False, 2, 2)
    with pytest.raises(ValueError, match=r"max_distance must be at most 2\*\*63 - 1"):
        t5_relative_position_bucket(np.array([1]), max_distance=2**64)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_of_the_most_distant_positions_are_the_last(bidirectional):
    """Distances at the ends of int64 and uint64 (where a negation or a cast
    to int64 would wrap) fall in the last bucket of their direction."""
    int64 = np.iinfo(np.int64)
    future, past = (31, 15) if bidirectional else (0, 31)
    signed = t5_relative_position_bucket(
        np.array([int64.min, int64.min + 1, int64.max]), bidirectional
    )
    assert signed.tolist() == [past, past, future]
    unsigned = np.array([2**64 - 1, 2**63, 2**63 - 1, 3], np.uint64)
    assert t5_relative_position_bucket(unsigned, bidirectional).tolist() == [future] * 3 + [
        t5_reference(3, bidirectional, 32, 128)
    ]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets", [2**32, 2**40, 2**63 - 1])
def test_t5_buckets_beyond_int64_in_the_float_term_are_the_last(bidirectional, num_buckets):
    """With many buckets, the float32 term of a far distance exceeds int64
    (~1e20 buckets beyond the exact ones): the bucket is the last of its
    direction, never a wrapped, negative one."""
    max_distance = num_buckets // 4 + 1 if bidirectional else num_buckets // 2 + 1
    distances = np.array([-(2**62), 2**62, -5, 5])
    half = num_buckets // 2 if bidirectional else num_buckets
    future, past = (2 * half - 1, half - 1) if bidirectional else (0, num_buckets - 1)
    buckets = t5_relative_position_bucket(distances, bidirectional, num_buckets, max_distance)
    assert buckets.tolist() == [past, future] + [
        t5_reference(r, bidirectional, num_buckets, max_distance) for r in (-5, 5)
    ]


# --- ALiBi ---------------------------------------------------------------------------


def slopes_by_rule(n):
    """The paper's rule, written from its definition: geometric, start = ratio = 2^(-8/n)."""

    def geometric(count):
        return [2.0 ** (-8.0 * i / count) for i in range(1, count + 1)]

    power = 2 ** math.floor(math.log2(n))
    if power == n:
        return geometric(n)
    return geometric(power) + geometric(2 * power)[0::2][: n - power]


@pytest.mark.parametrize("n", range(1, 65))
def test_alibi_slopes_follow_the_rule(n):
    slopes = alibi_slopes(n)
    assert slopes.shape == (n,)
    # The paper's code computes start * start**i: a few ULP from 2^(-8i/n).
    np.testing.assert_allclose(slopes, slopes_by_rule(n), rtol=4e-15)


def paper_slopes(n):
    """The ALiBi paper's ``get_slopes``, as its code writes it."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n", [*range(1, 70), 1000, 4097])
def test_alibi_slopes_are_the_papers_bit_for_bit(n):
    assert_bitwise_equal(alibi_slopes(n), np.array(paper_slopes(n)))


def test_alibi_slopes_take_no_more_memory_than_their_array():
    """No Python list of the slopes on the way (about 48 bytes a head for
    a head count between two powers of two)."""
    heads = 3 * 2**17
    _, peak = peak_memory(lambda: alibi_slopes(heads))
    assert peak < 1.25 * 8 * heads


def test_empty_alibi_biases_compute_no_slopes():
    bias, peak = peak_memory(lambda: alibi_bias(2**22, 0, 5))
    assert bias.shape == (5, 0, 2**22) and bias.dtype == np.float32
    assert peak < 2**20


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_alibi_bias_matches_loop(causal, dtype):
    heads, lq, lk = 5, 4, 6
    bias = alibi_bias(heads, lq, lk, causal=causal, dtype=dtype)
    assert bias.shape == (lk, lq, heads) and bias.dtype == dtype
    slopes = alibi_slopes(heads).astype(dtype)
    for k, q, h in np.ndindex(lk, lq, heads):
        expected = -np.inf if causal and k > q else -(slopes[h] * dtype(abs(q - k)))
        assert bias[k, q, h] == expected


@pytest.mark.parametrize("causal", [False, True])
def test_decoding_steps_take_the_last_queries_of_the_whole_bias(causal):
    """Cached decoding: queries from ``offset`` on give the last columns of
    the whole sequence's bias (ALiBi) or index rows (relative positions),
    where queries counted from 0 masked every key but the first; offsets
    beyond 2**62 are refused (distances would leave int64)."""
    heads, length = 3, 9
    whole = alibi_bias(heads, length, causal=causal)
    for steps in (1, 3):
        step = alibi_bias(heads, steps, length, offset=length - steps, causal=causal)
        assert_bitwise_equal(step, whole[:, -steps:])
        index = relative_position_index(steps, length, 2, offset=length - steps)
        assert_bitwise_equal(index, relative_position_index(length, length, 2)[-steps:])
    rel = RelativePE(2, 4, seed=0)
    assert_bitwise_equal(rel(1, length, offset=length - 1), rel(length, length)[-1:])
    far = alibi_bias(1, 1, 2, offset=2**62)
    assert far[:, 0, 0].tolist() == [-(alibi_slopes(1)[0] * 2.0**62)] * 2
    assert relative_position_index(1, 2, 1, offset=2**62).tolist() == [[0, 0]]
    for make in (partial(alibi_bias, 1, 1), partial(relative_position_index, 1, 1, 1)):
        with pytest.raises(ValueError, match=r"offset must be at most 4611686018427387904"):
            make(offset=2**62 + 1)
        with pytest.raises(ValueError, match="offset must be >= 0"):
            make(offset=-1)


def test_alibi_bias_broadcasts_over_julia_heads_batch_axis():
    bias = alibi_bias(2, 3)
    tiled = np.tile(bias, (1, 1, 4))  # heads vary fastest in (heads*batch)
    assert tiled.shape == (3, 3, 8)
    assert_bitwise_equal(tiled[:, :, 5], bias[:, :, 1])


def test_alibi_errors():
    with pytest.raises(ValueError, match="n_heads must be >= 1"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match=r"^dtype must be np.float32 or np.float64, got .*float16"):
        alibi_bias(2, 3, dtype=np.float16)
