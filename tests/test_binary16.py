"""The float16 conversions: correctly rounded, NaNs as F16C and Julia give
them, and the hardware and integer forms equal on every input."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from llvmlite import binding

from positional_embeddings import _binary16, _parallel
from positional_embeddings._binary16 import (
    _fpext_half,
    _fptrunc_half,
    f16_bits_to_f32,
    f16_bits_to_f32_software,
    f32_to_f16_bits,
    f32_to_f16_bits_software,
    f64_to_f16_bits,
    native_binary16,
    round_f16,
)
from positional_embeddings._julia_math import f32_from_bits
from positional_embeddings._kernels import widened_f16

needs_native = pytest.mark.skipif(
    not native_binary16(), reason="the CPU Numba compiles for has no binary16 instructions"
)


@numba.njit
def _hardware_decoding(bits):
    return _fpext_half(bits)


@numba.njit
def _hardware_encoding(value):
    return _fptrunc_half(value)


@numba.njit
def _decode_all(decode, out):
    for u in range(out.size):
        out[u] = decode(np.uint16(u))


@numba.njit
def _encode_each(encode, x, out):
    for k in range(x.size):
        out[k] = encode(x[k])


@numba.njit
def _encoders_disagree(lo, hi):
    """How many float32 bit patterns in ``lo .. hi`` the two encoders round differently."""
    count = 0
    for u in range(lo, hi):
        x = f32_from_bits(np.uint32(u))
        count += _fptrunc_half(x) != f32_to_f16_bits_software(x)
    return count


@numba.njit
def _rounded_each(x, out):
    for k in range(x.size):
        out[k] = round_f16(x[k])


def decoded(decode) -> np.ndarray:
    out = np.empty(1 << 16, np.float32)
    _decode_all(decode, out)
    return out


def encoded(encode, x: np.ndarray) -> np.ndarray:
    out = np.empty(x.size, np.uint16)
    _encode_each(encode, x, out)
    return out


def every_rounding_case() -> np.ndarray:
    """float32 values of every sign, exponent and leading 11 fraction bits,
    with each of the lower 12 bits' cases for rounding (zero, just below,
    at and just above the halfway point, all ones), plus the NaNs' edges."""
    high = np.arange(1 << 20, dtype=np.uint32) << np.uint32(12)
    low = np.array([0, 1, 0x7FF, 0x800, 0x801, 0xFFE, 0xFFF], np.uint32)
    bits = (high[:, None] | low[None, :]).ravel()
    return bits.view(np.float32)


def nan_payloads(bits: np.ndarray) -> np.ndarray:
    """The binary16 NaN F16C's ``vcvtps2ph`` makes of float32 NaN bits:
    quiet, with the sign and the payload's leading bits."""
    sign = (bits >> np.uint32(16)) & np.uint32(0x8000)
    return (sign | np.uint32(0x7E00) | ((bits >> np.uint32(13)) & np.uint32(0x3FF))).astype(
        np.uint16
    )


def test_software_decoding_is_exact_and_quiets_nans():
    ours = decoded(f16_bits_to_f32_software).view(np.uint32)
    every = np.arange(1 << 16, dtype=np.uint16)
    numbers = every.view(np.float16)
    finite = ~np.isnan(numbers)
    assert np.array_equal(ours[finite], numbers[finite].astype(np.float32).view(np.uint32))
    nans = every[~finite].astype(np.uint32)
    sign = (nans & np.uint32(0x8000)) << np.uint32(16)
    quiet = sign | np.uint32(0x7FC00000) | ((nans & np.uint32(0x3FF)) << np.uint32(13))
    assert np.array_equal(ours[~finite], quiet)


def test_software_encoding_rounds_to_nearest_even():
    x = every_rounding_case()
    ours = encoded(f32_to_f16_bits_software, x)
    numbers = ~np.isnan(x)
    with np.errstate(over="ignore"):
        expected = x[numbers].astype(np.float16).view(np.uint16)
    assert np.array_equal(ours[numbers], expected)
    assert np.array_equal(ours[~numbers], nan_payloads(x[~numbers].view(np.uint32)))


@needs_native
def test_hardware_decoding_equals_the_software_form_on_every_input():
    native = decoded(_hardware_decoding).view(np.uint32)
    assert np.array_equal(native, decoded(f16_bits_to_f32_software).view(np.uint32))


@needs_native
def test_hardware_encoding_equals_the_software_form_on_every_float32():
    assert _encoders_disagree(0, 1 << 32) == 0


def test_the_conversions_in_use_are_the_chosen_form():
    x = every_rounding_case()
    expected_encoder = _hardware_encoding if native_binary16() else f32_to_f16_bits_software
    assert np.array_equal(encoded(f32_to_f16_bits, x), encoded(expected_encoder, x))
    assert np.array_equal(
        decoded(f16_bits_to_f32).view(np.uint32),
        decoded(f16_bits_to_f32_software).view(np.uint32),
    )
    rounded = np.empty_like(x)
    _rounded_each(x, rounded)
    finite = ~np.isnan(x)
    with np.errstate(over="ignore"):
        expected = x[finite].astype(np.float16).astype(np.float32)
    assert np.array_equal(rounded[finite].view(np.uint32), expected.view(np.uint32))


def halfway_neighbours() -> np.ndarray:
    """Doubles at, and a hair either side of, the midpoints between adjacent
    float16 values: a hair that float32 cannot hold, so that rounding through
    float32 rounds twice and lands on the wrong side."""
    bits = np.arange(0x7BFF, dtype=np.uint16)
    low = bits.view(np.float16).astype(np.float64)
    high = (bits + np.uint16(1)).view(np.float16).astype(np.float64)
    middle = (low + high) / 2
    hair = (high - low) * 2.0**-40
    points = np.concatenate([middle, middle + hair, middle - hair])
    return np.concatenate([points, -points])


def test_float64_encoding_rounds_once():
    rng = np.random.default_rng(16)
    wide = rng.standard_normal(200_000) * np.exp2(rng.integers(-30, 20, 200_000))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 65519.99, 65520.0, 1e300, -1e-300, 2.0**-25])
    x = np.concatenate([halfway_neighbours(), wide, specials])
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
        through_float32 = x.astype(np.float32).astype(np.float16).view(np.uint16)
    assert np.array_equal(encoded(f64_to_f16_bits, x), expected)
    assert not np.array_equal(through_float32, expected)


def test_float64_nans_keep_sign_and_leading_payload():
    bits = np.array(
        [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF],
        np.uint64,
    )
    with np.errstate(invalid="ignore"):
        single = bits.view(np.float64).astype(np.float32).view(np.uint32)
    assert np.array_equal(encoded(f64_to_f16_bits, bits.view(np.float64)), nan_payloads(single))


@pytest.mark.parametrize(
    ("triple", "cpu", "features", "native"),
    [
        ("x86_64-unknown-linux-gnu", "generic", "+f16c", True),
        ("x86_64-unknown-linux-gnu", "generic", "", False),
        ("x86_64-unknown-linux-gnu", "generic", "+avx,+f16c,-avx", False),  # -avx: F16C off
        ("x86_64-unknown-linux-gnu", "generic", "-avx,+f16c", True),  # +f16c: AVX on again
        ("x86_64-unknown-linux-gnu", "ivybridge", "", True),
        ("x86_64-unknown-linux-gnu", "sandybridge", "", False),
        ("aarch64-unknown-linux-gnu", "generic", "", True),
        ("arm64-apple-darwin23.0.0", "generic", "", True),
        ("powerpc64le-unknown-linux-gnu", "generic", "", False),
    ],
)
def test_llvm_decides_where_the_instructions_are_used(triple, cpu, features, native):
    """LLVM compiles the conversions to instructions for these targets, to
    library calls for the others (which Numba's linker lacks)."""
    binding.initialize_all_targets()
    binding.initialize_all_asmprinters()
    try:
        binding.Target.from_triple(triple)
    except RuntimeError as error:
        pytest.skip(f"this LLVM has no {triple} target: {error}")
    assert _binary16.converts_in_hardware(triple, cpu, features) is native


def test_the_choice_is_for_numbas_own_target():
    from numba.core.registry import cpu_target

    target = cpu_target.target_context.codegen().magic_tuple()
    assert native_binary16() is _binary16.converts_in_hardware(*target)


def test_widened_tables_hold_every_float16_exactly(monkeypatch):
    """``widened_f16`` (RoPE's float32 copies of float16 tables), on one
    thread and split over two, with every binary16 value in the table."""
    table = np.arange(1 << 16, dtype=np.uint16).view(np.float16).reshape(256, 256, order="F")
    expected = decoded(f16_bits_to_f32_software).reshape(256, 256, order="F")
    for per_thread in (1 << 40, 1024):
        monkeypatch.setattr(_parallel, "MIN_BYTES_PER_THREAD", per_thread)
        wide = widened_f16(table[:, ::-1])
        assert wide.flags.f_contiguous and wide.dtype == np.float32
        assert np.array_equal(wide.view(np.uint32), expected[:, ::-1].view(np.uint32))
