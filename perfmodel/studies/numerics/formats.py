"""Element and scale number formats for the block-scaled quantization emulator (`numerics`).

Exact, vectorized float32 → format → float32 rounding for the small floating-point formats that
block-scaled GEMMs use:

  E2M1   FP4 element: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no Inf/NaN encodings, so conversion always
         saturates to ±6 (OCP Microscaling Formats v1.0, FP4 element type; NVFP4 paper
         arXiv:2509.25149, format section).
  E4M3   OCP FP8 (OCP 8-bit Floating Point Specification v1.0; MX v1.0 FP8 elements): bias 7,
         max 448 = 1.75·2^8, min normal 2^-6, min subnormal 2^-9, no Infinity,
         NaN = S.1111.111 (0x7F/0xFF).
  E5M2   OCP FP8: bias 15, max 57344 = 1.75·2^15, min subnormal 2^-16, IEEE-style ±Inf and NaNs.
  BF16   reference format (IEEE-style: 8 exponent bits, 7 mantissa bits).
  UE8M0  MX shared scale (MX v1.0, E8M0 scale type): the powers of two 2^-127..2^127 (codes
         0..254), NaN = 0xFF; no zero, no sign.

Rounding is round-to-nearest-even (RNE) on the format's own grid, subnormals included, or unbiased
stochastic rounding (SR). It works on float32 bits: the binade exponent e = floor(log2|x|) comes
from the float32 exponent field, clamped below at the format's min normal exponent (so subnormals
share the min-normal quantum), and |x| / 2^(e−m) is an exact float32 scaling whose integer part
`np.rint` rounds with ties to even. No per-element Python and no lookup loops.

Why float32: the hardware quantizers (Transformer Engine's cast kernels, the Blackwell `cvt`
instructions) take FP32 (or BF16 widened to FP32) inputs and compute scales in FP32, so the
emulator follows FP32 arithmetic step by step rather than computing in float64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)


@dataclass(frozen=True)
class FloatFormat:
    """A small binary floating-point format: 1 sign bit, `exp_bits`, `man_bits`, exponent `bias`.

    `max_finite` is given explicitly because E4M3 spends its top mantissa code of the top binade on
    NaN (so its max is 1.75·2^8 = 448, not 1.875·2^8), E5M2 its top binade on Inf/NaN.
    `special`: "none" (E2M1: every code is a number), "nan_only" (E4M3: S.1111.111 is NaN, no Inf),
    "ieee" (E5M2, BF16: top exponent = Inf (mantissa 0) or NaN)."""
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_finite: float
    special: str

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal; subnormals use the quantum 2^(emin − man_bits)."""
        return 1 - self.bias

    @property
    def min_normal(self) -> float:
        return 2.0 ** self.emin

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.man_bits)

    @property
    def emax(self) -> int:
        """Exponent of the largest normal binade (MX v1.0 Table 2's emax_elem: 2, 8, 15)."""
        return int(np.floor(np.log2(self.max_finite)))

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits


E2M1 = FloatFormat("e2m1", 2, 1, 1, 6.0, "none")
E4M3 = FloatFormat("e4m3", 4, 3, 7, 448.0, "nan_only")
E5M2 = FloatFormat("e5m2", 5, 2, 15, 57344.0, "ieee")
BF16 = FloatFormat("bf16", 8, 7, 127, float(np.float32(3.3895313892515355e38)), "ieee")
ELEMENT_FORMATS = {f.name: f for f in (E2M1, E4M3, E5M2)}


def get_format(fmt: FloatFormat | str) -> FloatFormat:
    if isinstance(fmt, FloatFormat):
        return fmt
    try:
        return {**ELEMENT_FORMATS, "bf16": BF16}[str(fmt).lower()]
    except KeyError:
        raise ValueError(f"unknown element format {fmt!r}; expected one of "
                         f"{sorted(ELEMENT_FORMATS) + ['bf16']}") from None


def _pow2_f32(exponent: np.ndarray) -> np.ndarray:
    """2^exponent as float32 from the exponent field; exact for exponent in [−126, 127]."""
    return ((np.asarray(exponent, dtype=np.int32) + 127) << 23).view(F32)


def round_magnitudes(t: np.ndarray, fmt: FloatFormat, uniform: np.ndarray | None = None,
                     saturate: bool = True) -> tuple[np.ndarray, int]:
    """Round float32 `t` onto `fmt`'s grid; returns (rounded float32, count of |t| > max_finite).

    `uniform` (same shape, float32 in [0, 1)) switches RNE to stochastic rounding: with s = |t|
    in units of the local quantum, round up iff u < s − floor(s), so P(up) = frac(s) and
    E[result] = t (unbiased) wherever no clamping happens. For normal-range inputs frac(s) has at
    most 24 − (man_bits+1) fractional bits and float32 uniforms are multiples of 2^-24, so P(up) is
    exact; below the format's min normal the bias is at most 2^-24 of a quantum.

    The returned count is of elements at or beyond `overflow_threshold` (RNE overflow).
    Saturation (`saturate=True`, the "satfinite" conversions TE and the MX spec use) clamps |t|
    to max_finite before rounding; that equals rounding then clamping, because max_finite is on
    the grid and rounding is monotone. Without saturation, results above max_finite overflow to Inf
    (E5M2, BF16) or NaN (E4M3); E2M1 has neither, so it always saturates. NaN inputs stay NaN."""
    t = np.asarray(t, dtype=F32)
    a = np.abs(t)
    with np.errstate(invalid="ignore"):
        # Count only values that RNE onto an unbounded-exponent grid would take above max_finite,
        # i.e. clamping changed the result: not NVFP4's routine 6.0–6.4 block maxima (a scale
        # rounded down by E4M3), which round to 6 anyway.
        threshold, odd_max = overflow_threshold(fmt)
        n_saturated = int(np.count_nonzero(a >= threshold if odd_max else a > threshold))
        # Clamp first: also keeps Inf out of the exponent arithmetic below (NaN passes through).
        np.minimum(a, F32(fmt.max_finite if (saturate or fmt.special == "none")
                          else 2 * fmt.max_finite), out=a)
        e = (a.view(np.int32) >> 23) - 127          # floor(log2 a) for float32 normals
        np.maximum(e, fmt.emin, out=e)               # subnormals share the min-normal quantum
        # NaN has exponent field 255 → e = 128, giving a 0 or garbage scale; NaN·anything is NaN.
        s = a * _pow2_f32(fmt.man_bits - np.minimum(e, 126 + fmt.man_bits))   # exact
        if uniform is None:
            r = np.rint(s)                           # round half to even on the integer grid
        else:
            r = np.floor(s)
            r += uniform < (s - r)
        r *= _pow2_f32(e - fmt.man_bits)             # exact: small integer times a power of two
        if not saturate and fmt.special != "none":
            over = r > fmt.max_finite
            if over.any():
                r[over] = np.inf if fmt.special == "ieee" else np.nan
    return np.copysign(r, t), n_saturated


def overflow_threshold(fmt: FloatFormat) -> tuple[float, bool]:
    """(T, ties_overflow): RNE takes |x| > T (and |x| = T when ties_overflow) above max_finite.
    T = max_finite + half its ulp; ties overflow when max_finite's mantissa is odd (E2M1's 6 =
    1.1b·2^2 and E5M2's 57344 = 1.11b·2^15: T = 7, 61440), not when even (E4M3's 448 = 1.110b·2^8:
    464 rounds to 448)."""
    ulp = 2.0 ** (fmt.emax - fmt.man_bits)
    mantissa_code = int(round(fmt.max_finite / ulp)) - (1 << fmt.man_bits)
    return fmt.max_finite + ulp / 2, bool(mantissa_code & 1)


def round_to_format(x, fmt: FloatFormat | str, *, rounding: str = "rne",
                    rng: np.random.Generator | int | None = None,
                    saturate: bool = True) -> np.ndarray:
    """Round `x` (converted to float32) to the nearest value of `fmt`, returned as float32.

    rounding: "rne" (round to nearest, ties to even) or "sr" (stochastic, unbiased; `rng` is a
    numpy Generator or a seed). saturate: clamp overflow to ±max_finite (default, as TE's and the
    MX spec's conversions do) instead of producing Inf/NaN. BF16 is rounded on the float32 bit
    pattern (it shares float32's exponent range) and never saturates."""
    fmt = get_format(fmt)
    x = np.asarray(x, dtype=F32)
    if fmt is BF16:
        if rounding != "rne":
            raise ValueError("bf16 supports rounding='rne' only")
        return round_to_bf16(x)
    uniform = None
    if rounding == "sr":
        uniform = np.random.default_rng(rng).random(x.shape, dtype=F32)
    elif rounding != "rne":
        raise ValueError(f"rounding must be 'rne' or 'sr', got {rounding!r}")
    return round_magnitudes(x, fmt, uniform, saturate)[0]


def round_to_bf16(x) -> np.ndarray:
    """float32 → BF16 (RNE, IEEE overflow to Inf, NaN kept) → float32, by the usual bit trick:
    add 0x7FFF plus the lowest kept bit, then truncate 16 bits. Subnormals need no special case
    because BF16 and float32 share the exponent field."""
    x = np.asarray(x, dtype=F32)
    b = x.view(np.uint32)
    r = ((b + (np.uint32(0x7FFF) + ((b >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)).view(F32)
    return np.where(np.isnan(x), x, r)


# ---------------------------------------------------------------------------------------------
# UE8M0 scales
# ---------------------------------------------------------------------------------------------
UE8M0_MIN_EXP, UE8M0_MAX_EXP = -127, 127


def ue8m0_exponent(x, rounding: str = "floor") -> np.ndarray:
    """Unbiased exponent (int32) of the UE8M0 value for positive `x`; −128 marks NaN (code 0xFF).

    rounding: "floor" = 2^floor(log2 x), what the MX shared-exponent rule uses (OCP MX v1.0);
    "ceil" = 2^ceil(log2 x), the round-up (cvt.rp) mode that never lets a scaled block exceed the
    element max; "rne" = nearest in linear value with an exact tie (1.5·2^k) going to the even
    code (biased exponent even), as for any format whose significand is empty.
    Results clamp to [2^-127, 2^127] (UE8M0 has no zero: 0 and underflow give 2^-127). Negative
    numbers, NaN and ±Inf give NaN (UE8M0 is unsigned and has no Infinity)."""
    x = np.asarray(x, dtype=F32)
    m, e = np.frexp(x)                    # x = m·2^e, m in [0.5, 1): floor(log2 x) = e − 1
    e = e.astype(np.int32) - 1
    if rounding == "ceil":
        e += m != 0.5
    elif rounding == "rne":
        twice = 2 * m                     # x / 2^floor in [1, 2)
        e += (twice > 1.5) | ((twice == 1.5) & ((e + 127) % 2 == 1))
    elif rounding != "floor":
        raise ValueError(f"ue8m0 rounding must be 'floor', 'ceil' or 'rne', got {rounding!r}")
    e = np.clip(e, UE8M0_MIN_EXP, UE8M0_MAX_EXP)
    e = np.where(x == 0, UE8M0_MIN_EXP, e)
    return np.where(np.isfinite(x) & (x >= 0), e, -128).astype(np.int32)


def ue8m0_value(exponent) -> np.ndarray:
    """float32 2^exponent for UE8M0 exponents (−128 → NaN). 2^-127 is a float32 subnormal but
    exact."""
    exponent = np.asarray(exponent, dtype=np.int32)
    v = np.ldexp(F32(1.0), np.clip(exponent, UE8M0_MIN_EXP, UE8M0_MAX_EXP)).astype(F32)
    return np.where(exponent == -128, F32(np.nan), v)


def to_ue8m0(x, rounding: str = "floor") -> np.ndarray:
    """Round positive `x` to a UE8M0 scale, returned as float32 (see `ue8m0_exponent`)."""
    return ue8m0_value(ue8m0_exponent(x, rounding))


def ue8m0_encode(x, rounding: str = "floor") -> np.ndarray:
    """UE8M0 codes (uint8): biased exponent e + 127, 0xFF for NaN."""
    e = ue8m0_exponent(x, rounding)
    return np.where(e == -128, 255, e + 127).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Bit codes (for tests and for inspecting stored data)
# ---------------------------------------------------------------------------------------------
def decode(codes, fmt: FloatFormat | str) -> np.ndarray:
    """float32 values of `fmt` bit codes (E2M1 uses the low 4 bits of a uint8)."""
    fmt = get_format(fmt)
    c = np.asarray(codes).astype(np.int64) & ((1 << fmt.bits) - 1)
    sign = np.where(c >> (fmt.bits - 1), -1.0, 1.0)
    ef = (c >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    mf = c & ((1 << fmt.man_bits) - 1)
    mag = np.where(ef == 0, mf * 2.0 ** (fmt.emin - fmt.man_bits),
                   (1.0 + mf / 2.0 ** fmt.man_bits) * 2.0 ** (ef - fmt.bias))
    top = ef == (1 << fmt.exp_bits) - 1
    if fmt.special == "ieee":
        mag = np.where(top, np.where(mf == 0, np.inf, np.nan), mag)
    elif fmt.special == "nan_only":
        mag = np.where(top & (mf == (1 << fmt.man_bits) - 1), np.nan, mag)
    return (sign * mag).astype(F32)


def encode(x, fmt: FloatFormat | str, *, saturate: bool = True) -> np.ndarray:
    """Bit codes (uint8) of `x` rounded RNE to `fmt` (8-bit formats and E2M1, whose 4-bit codes sit
    in the low bits). NaN → the canonical NaN code 0x7F (with the input's sign bit; E2M1 has no
    NaN, so it gets the max-magnitude code 0x7); E5M2 ±Inf → 0x7C/0xFC."""
    fmt = get_format(fmt)
    if fmt.bits > 8:
        raise ValueError(f"encode supports formats of at most 8 bits, not {fmt.name}")
    v = round_to_format(x, fmt, saturate=saturate).astype(np.float64)
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), fmt.emin)
        sub = a < fmt.min_normal
        mant = np.where(sub, a / fmt.min_subnormal, a / 2.0 ** (e - fmt.man_bits)
                        - 2 ** fmt.man_bits)
        ef = np.where(sub, 0, e + fmt.bias)
        code = (np.nan_to_num(ef).astype(np.int64) << fmt.man_bits) | np.nan_to_num(mant).astype(
            np.int64)
    top = (1 << (fmt.bits - 1)) - 1                     # 0x7F for 8-bit formats
    code = np.where(np.isnan(v), top, code)
    if fmt.special == "ieee":
        code = np.where(np.isinf(v), ((1 << fmt.exp_bits) - 1) << fmt.man_bits, code)
    code = code | (np.signbit(v).astype(np.int64) << (fmt.bits - 1))
    return code.astype(np.uint8)


def representable_values(fmt: FloatFormat | str) -> np.ndarray:
    """All distinct finite values of `fmt`, sorted ascending (float32; −0 dropped)."""
    fmt = get_format(fmt)
    v = decode(np.arange(1 << fmt.bits), fmt)
    return np.unique(v[np.isfinite(v)] + F32(0.0))
