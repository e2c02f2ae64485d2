"""Quantize → dequantize emulator for block-scaled low-precision formats (numpy, vectorized).

Lets a user weigh a format's speed (the GEMM cost model) against its error on their own tensors,
layer by layer. Every format function takes an array, quantizes it exactly as the format's
reference recipe does (FP32 scale arithmetic, RNE or stochastic element conversion), dequantizes,
and returns a `Quantized` (unpacks as `x_hat, report = nvfp4(x)`).

Formats and the scale rule each one uses (x: the input, converted to float32; amax: max |x| over
the block or tensor; all scale arithmetic in FP32):

  nvfp4      E2M1 elements, one E4M3 scale per 1×16 block along the last axis (or per 16×16 tile
             with scaling="2d"), plus an FP32 per-tensor scale. NVFP4 paper (arXiv:2509.25149)
             Appendix B (notes: docs/studies.md §3.1), Transformer Engine (TE)
             nvfp4.rst (notes §3.5):
               s_enc   = 448·6 / amax_tensor        (FP32; 1 if amax is 0, capped at FLT_MAX)
               s_dec   = 1 / s_enc                  (the stored FP32 per-tensor scale)
               S_b     = e4m3_rne_satfinite((amax_b / 6) · s_enc)    (the stored block scale)
               s_enc_b = 1 / (S_b · s_dec)          (FP32, capped at FLT_MAX; 0 when S_b = 0)
               q_i     = e2m1(x_i · s_enc_b)        (RNE, or SR for gradients)
               x̂_i     = (q_i · S_b) · s_dec        (q_i·S_b is exact in FP32)
             The block holding the tensor amax gets S_b = 448, so block scales span E4M3's range.
  mxfp4      E2M1 elements, UE8M0 scale per 32 (OCP Microscaling Formats v1.0, conversion of a
             vector of scalars to an MX block: the shared-exponent rule):
  mxfp8      E4M3 (or E5M2) elements, UE8M0 scale per 32, same rule:
               X_b = 2^(floor(log2 amax_b) − emax_elem), emax_elem = 2 (E2M1), 8 (E4M3), 15 (E5M2),
               clamped to UE8M0's 2^-127..2^127; q_i = elem(x_i / X_b) saturating; x̂_i = q_i · X_b.
             scale_mode="ceil" uses X_b = 2^ceil(log2(amax_b / max_elem)) instead (never saturates;
             the round-up UE8M0 conversion, cvt.rp.satfinite.ue8m0x2.f32).
  fp8        per-tensor E4M3 (or E5M2) with amax scaling ("current scaling" in TE):
               scale = max_elem / amax (1 if amax is 0), scale_inv = 1/scale,
               x̂ = e4m3(x · scale) · scale_inv
  fp8_block  DeepSeek-V3 style (arXiv:2412.19437 §3.3, FP8 training): FP32 scales per 1×128
             (activations, gradients) or 128×128 (weights) block: S_b = amax_b / 448,
             x̂ = e4m3(x / S_b) · S_b.
  bf16       reference: RNE to BF16.

Options: `sr=True` stochastic rounding of the element conversion only (scales stay RNE, as on
Blackwell's cvt.rs and in the paper's recipe, notes §3.3); `rht=True` (or a ±1 sign vector)
applies the Random Hadamard Transform blockwise along the last axis before quantizing and its
inverse after, so x̂ is in x's domain (the paper uses d = 16 on the Wgrad operands, notes §3.3);
`scaling="2d"` (nvfp4) shares one scale per 16×16 tile (the paper's weight scaling, so forward and
backward see the same quantized weights).

Special values: a block (the scale's granule) that contains NaN or ±Inf gets a NaN scale (E4M3's
0x7F / UE8M0's 0xFF code), so all of its outputs are NaN and no other block changes; the
per-tensor amax is taken over finite values only, so one bad block does not poison the tensor.
(Hardware satfinite conversions would instead map Inf to the max finite value; the emulator
chooses visible NaNs.) For per-tensor fp8 and bf16 the granule is the element. An all-zero block
gets scale 0 (E4M3) or 2^-127 (UE8M0 has no zero) and decodes to exact zeros.

Report (dict; error metrics over outputs that are finite):
  rel_error             ‖x − x̂‖₂ / ‖x‖₂ (0 for an all-zero x)
  snr_db                10·log10(‖x‖² / ‖x − x̂‖²) (inf when exact)
  max_abs_error         max |x − x̂|
  frac_flushed_to_zero  fraction of elements with x ≠ 0 and x̂ = 0
  frac_saturated        fraction whose scaled value RNE would have taken above the element
                        format's max, so clamping changed it (e.g. E2M1 |t| ≥ 7, E4M3 |t| > 464)
  frac_nonfinite        fraction of outputs that are NaN
  bytes_per_element     element bytes + scale bytes per element as the GEMM consumes them
                        (nvfp4: 0.5 + 1/16 + 4/numel; 2D scales are replicated per 1×16 row,
                        notes §3.3); scale-tensor padding/swizzling for the tensor cores is not
                        included (that belongs to the GEMM cost model).
With RHT, rel_error/snr_db/max_abs_error are measured in x's domain; the flush and saturation
fractions count the transformed elements the quantizer saw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from perfmodel.studies.numerics.formats import (E2M1, E4M3, E5M2, F32, FLT_MAX, FloatFormat,
                                                get_format, round_magnitudes, round_to_bf16,
                                                to_ue8m0, ue8m0_exponent, ue8m0_value)

# Elements processed per step: small enough that a step's temporaries stay in cache (the big win
# over whole-array numpy passes), large enough that per-step Python overhead is negligible.
CHUNK_ELEMENTS = 1 << 18
NVFP4_BLOCK = 16
MX_BLOCK = 32
FP8_BLOCK = 128


@dataclass(frozen=True, eq=False)
class Quantized:
    """Result of a quantize→dequantize call.

    x_hat         dequantized values, float32, x's shape
    report        error metrics (see the module docstring)
    block_scales  stored block scale values (float32: E4M3, UE8M0 or FP32 values), laid out one per
                  1×block_w run of the last axis: shape x.shape[:-1] + (ceil(n_last / block_w),);
                  2D tiles repeat their scale on each of their rows. None for per-tensor formats.
    tensor_scale  stored FP32 per-tensor decode scale (nvfp4 s_dec, fp8 scale_inv) or None.
    Iterating yields (x_hat, report), so `x_hat, report = nvfp4(x)` works."""
    x_hat: np.ndarray
    report: dict
    block_scales: np.ndarray | None = None
    tensor_scale: float | None = None

    def __iter__(self):
        return iter((self.x_hat, self.report))


# ---------------------------------------------------------------------------------------------
# Random Hadamard Transform
# ---------------------------------------------------------------------------------------------
def hadamard(d: int) -> np.ndarray:
    """Sylvester Hadamard matrix of order d (a power of two), entries ±1 (float64, unnormalized)."""
    if d < 1 or d & (d - 1):
        raise ValueError(f"Hadamard order must be a power of two, got {d}")
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def rht_signs(d: int = NVFP4_BLOCK, seed: int = 0) -> np.ndarray:
    """The random ±1 diagonal (float32). The paper uses one sign vector for all layers and the whole
    run (notes §3.3), hence a fixed default seed."""
    return np.random.default_rng(seed).choice(np.array([-1.0, 1.0], dtype=F32), size=d)


def rht_matrix(signs) -> np.ndarray:
    """M = diag(signs) · H_d / √d (float32), applied to row blocks as x_b · M. Orthogonal:
    M·Mᵀ = diag(s)·H·Hᵀ·diag(s) / d = I, so the inverse is x_b · Mᵀ."""
    signs = np.asarray(signs, dtype=np.float64)
    d = signs.shape[0]
    return (signs[:, None] * hadamard(d) / np.sqrt(d)).astype(F32)


def _rht_apply(x, signs, inverse: bool) -> np.ndarray:
    x = np.asarray(x, dtype=F32)
    m = rht_matrix(signs)
    d = m.shape[0]
    if x.ndim == 0 or x.shape[-1] % d:
        raise ValueError(f"RHT of size {d} needs the last axis to be a multiple of {d}, "
                         f"got shape {x.shape}")
    blocks = x.reshape(-1, d)
    with np.errstate(invalid="ignore", over="ignore"):
        return (blocks @ (m.T if inverse else m)).reshape(x.shape)


def rht(x, signs=None) -> np.ndarray:
    """Random Hadamard Transform blockwise along the last axis (blocks of len(signs), default 16
    with `rht_signs()`). Norm-preserving per block; NaN/Inf spread only within their block."""
    return _rht_apply(x, rht_signs() if signs is None else signs, inverse=False)


def inverse_rht(y, signs=None) -> np.ndarray:
    """Inverse of `rht` with the same signs: inverse_rht(rht(x)) = x up to float32 rounding."""
    return _rht_apply(y, rht_signs() if signs is None else signs, inverse=True)


# ---------------------------------------------------------------------------------------------
# Error statistics
# ---------------------------------------------------------------------------------------------
@dataclass
class _Stats:
    """Running sums for the report, fed chunk by chunk (float64 sums for accuracy)."""
    sum_x2: float = 0.0
    sum_err2: float = 0.0
    max_abs_error: float = 0.0
    flushed: int = 0
    saturated: int = 0
    nonfinite: int = 0

    def add(self, x: np.ndarray, xh: np.ndarray) -> None:
        finite = np.isfinite(xh)
        if not finite.all():
            self.nonfinite += int(xh.size - np.count_nonzero(finite))
            x, xh = x[finite], xh[finite]
        err = xh - x
        self.sum_x2 += float(np.add.reduce(np.square(x, dtype=np.float64), axis=None))
        self.sum_err2 += float(np.add.reduce(np.square(err, dtype=np.float64), axis=None))
        if err.size:
            self.max_abs_error = max(self.max_abs_error, float(np.max(np.abs(err))))
        self.flushed += int(np.count_nonzero((xh == 0) & (x != 0)))

    def report(self, label: str, numel: int, bytes_per_element: float) -> dict:
        if self.sum_err2 == 0:
            rel, snr = 0.0, float("inf")
        elif self.sum_x2 == 0:
            rel, snr = float("inf"), float("-inf")
        else:
            rel = float(np.sqrt(self.sum_err2 / self.sum_x2))
            snr = float(10 * np.log10(self.sum_x2 / self.sum_err2))
        n = max(numel, 1)
        return {"format": label, "numel": numel, "rel_error": rel, "snr_db": snr,
                "max_abs_error": self.max_abs_error, "frac_flushed_to_zero": self.flushed / n,
                "frac_saturated": self.saturated / n, "frac_nonfinite": self.nonfinite / n,
                "bytes_per_element": bytes_per_element}


def error_stats(x, x_hat) -> dict:
    """rel_error, snr_db, max_abs_error, frac_flushed_to_zero, frac_nonfinite of x_hat against x."""
    x = np.asarray(x, dtype=F32).ravel()
    xh = np.asarray(x_hat, dtype=F32).ravel()
    st = _Stats()
    for i in range(0, x.size, CHUNK_ELEMENTS):
        st.add(x[i:i + CHUNK_ELEMENTS], xh[i:i + CHUNK_ELEMENTS])
    r = st.report("", x.size, 0.0)
    return {k: r[k] for k in ("rel_error", "snr_db", "max_abs_error", "frac_flushed_to_zero",
                              "frac_nonfinite")}


# ---------------------------------------------------------------------------------------------
# The blocked engine
# ---------------------------------------------------------------------------------------------
# scale_fn(amax_b, amax_tensor) -> (stored_scale_b, encode_b, encode_by_division, tensor_dec).
# amax_b is float32 with non-finite blocks zeroed; the engine marks those blocks NaN afterwards.
ScaleFn = Callable[[np.ndarray, np.float32],
                   "tuple[np.ndarray, np.ndarray, bool, np.float32 | None]"]


@dataclass(frozen=True)
class _Scheme:
    label: str
    elem: FloatFormat
    tile_h: int
    tile_w: int
    scale_fn: ScaleFn
    block_scale_bytes: float          # bytes per stored block scale (0: per-tensor only)
    tensor_scale_bytes: float         # bytes of per-tensor scales
    scales_replicated: bool = False   # 2D scales fed to the GEMM once per 1×w row (NVFP4)
    nan_per_element: bool = False     # per-tensor formats: the NaN granule is the element
    exported_scales: bool = True


def _absmax_last(a: np.ndarray) -> np.ndarray:
    """max |a| over the last axis (NaN propagates). Halving and then a column loop: numpy's own
    reduction over a short last axis costs ~10 ns/element, this about 1."""
    a = np.abs(a)
    while a.shape[-1] > 16 and a.shape[-1] % 2 == 0:
        h = a.shape[-1] // 2
        a = np.maximum(a[..., :h], a[..., h:])
    m = a[..., 0].copy()
    for j in range(1, a.shape[-1]):
        np.maximum(m, a[..., j], out=m)
    return m


def _tiles_view(x: np.ndarray, h: int, w: int) -> tuple[np.ndarray, tuple]:
    """Zero-pad and reshape to (M, h, nbw, w): tile row, row in tile, tile column, column in tile.
    Zeros do not change any block's amax and decode to zero."""
    if h > 1 and x.ndim < 2:
        raise ValueError(f"{h}×{w} tiles need an array of at least 2 dimensions, got shape "
                         f"{x.shape}")
    pad = [(0, 0)] * x.ndim
    pad[-1] = (0, -x.shape[-1] % w)
    if h > 1:
        pad[-2] = (0, -x.shape[-2] % h)
    if any(p[1] for p in pad):
        x = np.pad(x, pad)
    return x.reshape(-1, h, x.shape[-1] // w, w), x.shape


def _quantize_tiles(x, scheme: _Scheme, sr: bool, seed) -> Quantized:
    x = np.asarray(x, dtype=F32)
    shape = x.shape                              # before ascontiguousarray makes 0-d into 1-d
    x = np.ascontiguousarray(x).reshape(shape or (1,))
    h, w = scheme.tile_h, scheme.tile_w
    if x.size == 0:
        nbw = -(-x.shape[-1] // w)
        bpe = scheme.elem.bits / 8 + scheme.block_scale_bytes / w
        return Quantized(x.reshape(shape).copy(), _Stats().report(scheme.label, 0, bpe),
                         np.zeros(x.shape[:-1] + (nbw,), F32) if scheme.exported_scales else None)
    tiles, padded_shape = _tiles_view(x, h, w)
    n_tiles, _, nbw, _ = tiles.shape
    rows_per_step = max(1, CHUNK_ELEMENTS // (h * nbw * w))

    # Pass 1 (the "amax pass"): per-tile amax; non-finite tiles flagged, and the tensor amax taken
    # over finite values only.
    amax_b = np.empty((n_tiles, nbw), F32)
    for i in range(0, n_tiles, rows_per_step):
        a = _absmax_last(tiles[i:i + rows_per_step])          # (m, h, nbw)
        amax_b[i:i + rows_per_step] = a[:, 0] if h == 1 else _absmax_last(np.moveaxis(a, 1, 2))
    bad = ~np.isfinite(amax_b)
    amax_t = F32(amax_b[~bad].max()) if (~bad).any() else F32(0)
    if bad.any():
        ti, tj = np.nonzero(bad)
        sub = tiles[ti, :, tj, :]
        finite_max = np.where(np.isfinite(sub), np.abs(sub), F32(0)).max(axis=(1, 2))
        amax_t = max(amax_t, F32(finite_max.max()))
        amax_b[bad] = 0

    with np.errstate(divide="ignore", over="ignore", invalid="ignore", under="ignore"):
        stored, enc, divide, tensor_dec = scheme.scale_fn(amax_b, amax_t)
    stored = np.broadcast_to(stored, amax_b.shape).astype(F32)
    enc = np.broadcast_to(enc, amax_b.shape).astype(F32)
    if bad.any() and not scheme.nan_per_element:
        stored[bad] = np.nan
        enc[bad] = np.nan

    # Pass 2: scale, round the elements, dequantize, accumulate the report.
    rng = np.random.default_rng(seed) if sr else None
    out = np.empty_like(tiles)
    st = _Stats()
    for i in range(0, n_tiles, rows_per_step):
        xc = tiles[i:i + rows_per_step]
        e = enc[i:i + rows_per_step, None, :, None]
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            t = xc / e if divide else xc * e
            u = rng.random(t.shape, dtype=F32) if rng is not None else None
            q, n_sat = round_magnitudes(t, scheme.elem, u)
            xh = q * stored[i:i + rows_per_step, None, :, None]
            if tensor_dec is not None:
                xh *= tensor_dec
        if scheme.nan_per_element:
            xh[~np.isfinite(xc)] = np.nan
        out[i:i + rows_per_step] = xh
        st.saturated += n_sat
        st.add(xc, xh)

    x_hat = out.reshape(padded_shape)
    if padded_shape != x.shape:
        x_hat = np.ascontiguousarray(x_hat[tuple(slice(0, n) for n in x.shape)])
    x_hat = x_hat.reshape(shape)

    numel = max(x.size, 1)
    # Replicated 2D scales are fed once per real row (padding rows are not stored).
    n_scales = (x.size // x.shape[-1] * nbw) if scheme.scales_replicated else n_tiles * nbw
    bpe = (scheme.elem.bits / 8 + scheme.block_scale_bytes * n_scales / numel
           + scheme.tensor_scale_bytes / numel)
    block_scales = None
    if scheme.exported_scales:
        # One value per 1×w run of the last axis; a 2D tile's scale repeats on each of its rows.
        bs = np.repeat(stored, h, axis=0) if h > 1 else stored
        bs = bs.reshape(padded_shape[:-1] + (nbw,))[..., : x.shape[-2], :] if h > 1 else bs
        block_scales = np.ascontiguousarray(bs).reshape(x.shape[:-1] + (nbw,))
    return Quantized(x_hat, st.report(scheme.label, x.size, bpe), block_scales,
                     None if tensor_dec is None else float(tensor_dec))


def _with_rht(x, signs, quantize: Callable[[np.ndarray], Quantized], label: str) -> Quantized:
    """Quantize RHT(x), map x̂ back with the inverse RHT, re-measure the error against x."""
    x = np.asarray(x, dtype=F32)
    signs = rht_signs() if signs is True else np.asarray(signs, dtype=F32)
    res = quantize(rht(x, signs))
    x_hat = inverse_rht(res.x_hat, signs)
    report = {**res.report, **error_stats(x, x_hat), "format": label}
    return Quantized(x_hat, report, res.block_scales, res.tensor_scale)


def _label(name: str, *flags: str) -> str:
    flags = [f for f in flags if f]
    return f"{name}[{','.join(flags)}]" if flags else name


def _rht_flag(rht) -> str:
    if rht is False or rht is None:
        return ""
    return "rht" if rht is True else f"rht{len(np.asarray(rht))}"


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------
def nvfp4_tensor_encode_scale(amax: float) -> np.float32:
    """s_enc = 448·6 / amax in FP32 (paper App. B; TE: s_global = amax / (448·6) is its inverse),
    capped at FLT_MAX, and 1 when amax is 0 (or s_enc underflows), so scales stay finite. The two
    guards follow TE's cast kernels as recalled, not checked against their source."""
    amax = F32(amax)
    with np.errstate(divide="ignore", over="ignore"):
        s = np.minimum(F32(448.0 * 6.0) / amax, FLT_MAX)
    return F32(1.0) if (amax == 0 or s == 0) else F32(s)


def _nvfp4_scales(amax_b, amax_t):
    s_enc = nvfp4_tensor_encode_scale(amax_t)
    s_dec = F32(1.0) / s_enc
    stored = round_magnitudes((amax_b / F32(6.0)) * s_enc, E4M3)[0]    # E4M3 RNE, satfinite
    enc = np.minimum(F32(1.0) / (stored * s_dec), FLT_MAX)
    enc[stored == 0] = 0        # zero (or flushed) block: elements 0, not "saturated" garbage
    return stored, enc, False, s_dec


def nvfp4(x, *, scaling: str = "1d", rht=False, sr: bool = False, seed=0) -> Quantized:
    """NVFP4 quantize→dequantize: E2M1 elements, E4M3 scale per 1×16 block (scaling="1d") or per
    16×16 tile of the last two axes ("2d"), FP32 per-tensor scale (module docstring; paper
    arXiv:2509.25149 App. B and its training recipe; TE nvfp4.rst). `rht`: True or a ±1 sign
    vector (RHT of that size along the last axis). `sr`: stochastic rounding of the E2M1
    conversion, `seed` an int or numpy Generator."""
    if scaling not in ("1d", "2d"):
        raise ValueError(f"scaling must be '1d' or '2d', got {scaling!r}")
    label = _label("nvfp4", "2d" if scaling == "2d" else "", _rht_flag(rht), "sr" if sr else "")
    scheme = _Scheme(label, E2M1, NVFP4_BLOCK if scaling == "2d" else 1, NVFP4_BLOCK,
                     _nvfp4_scales, block_scale_bytes=1, tensor_scale_bytes=4,
                     scales_replicated=True)
    if rht is not False and rht is not None:
        return _with_rht(x, rht, lambda y: _quantize_tiles(y, scheme, sr, seed), label)
    return _quantize_tiles(x, scheme, sr, seed)


def _mx_scales(elem: FloatFormat, scale_mode: str):
    def scales(amax_b, amax_t):
        if scale_mode == "ocp":
            e = ue8m0_exponent(amax_b, "floor") - elem.emax
        elif scale_mode == "ceil":
            e = ue8m0_exponent(amax_b / F32(elem.max_finite), "ceil")
        else:
            raise ValueError(f"scale_mode must be 'ocp' or 'ceil', got {scale_mode!r}")
        e = np.clip(e, -127, 127)
        # x / 2^e computed as x · 2^-e: exact either way, and multiplication is faster.
        return ue8m0_value(e), ue8m0_value(-e), False, None
    return scales


def _mx(name, elem, x, rht, sr, seed, scale_mode) -> Quantized:
    label = _label(name, "" if scale_mode == "ocp" else scale_mode, _rht_flag(rht),
                   "sr" if sr else "")
    scheme = _Scheme(label, elem, 1, MX_BLOCK, _mx_scales(elem, scale_mode), 1, 0)
    if rht is not False and rht is not None:
        return _with_rht(x, rht, lambda y: _quantize_tiles(y, scheme, sr, seed), label)
    return _quantize_tiles(x, scheme, sr, seed)


def mxfp4(x, *, rht=False, sr: bool = False, seed=0, scale_mode: str = "ocp") -> Quantized:
    """MXFP4: E2M1 elements, UE8M0 scale 2^(floor(log2 amax_b) − 2) per 32 along the last axis
    (OCP MX v1.0 shared-exponent rule; scale_mode="ceil" for the round-up variant). RHT and SR
    as for nvfp4 (the paper's MXFP4 comparison used RHT with d = 32: pass rht=rht_signs(32))."""
    return _mx("mxfp4", E2M1, x, rht, sr, seed, scale_mode)


def mxfp8(x, *, elem: str = "e4m3", rht=False, sr: bool = False, seed=0,
          scale_mode: str = "ocp") -> Quantized:
    """MXFP8: E4M3 (or E5M2) elements, UE8M0 scale 2^(floor(log2 amax_b) − emax_elem) per 32
    (OCP MX v1.0 shared-exponent rule)."""
    fmt = get_format(elem)
    if fmt not in (E4M3, E5M2):
        raise ValueError(f"mxfp8 elements are e4m3 or e5m2, got {elem!r}")
    return _mx("mxfp8" if fmt is E4M3 else "mxfp8_e5m2", fmt, x, rht, sr, seed, scale_mode)


def fp8(x, *, elem: str = "e4m3", sr: bool = False, seed=0) -> Quantized:
    """Per-tensor FP8 with amax scaling (TE current scaling): scale = max_elem / amax (FP32; 1 for
    an all-zero tensor), x̂ = elem(x · scale) · (1/scale). Non-finite inputs give NaN at their own
    element only."""
    fmt = get_format(elem)
    if fmt not in (E4M3, E5M2):
        raise ValueError(f"fp8 elements are e4m3 or e5m2, got {elem!r}")

    used = {}

    def scales(amax_b, amax_t):
        with np.errstate(divide="ignore", over="ignore"):
            scale = np.minimum(F32(fmt.max_finite) / F32(amax_t), FLT_MAX)
        scale = F32(1.0) if (amax_t == 0 or scale == 0) else F32(scale)
        used["scale_inv"] = F32(1.0) / scale
        return used["scale_inv"], scale, False, None

    label = _label("fp8" if fmt is E4M3 else "fp8_e5m2", "sr" if sr else "")
    scheme = _Scheme(label, fmt, 1, NVFP4_BLOCK, scales, 0, 4, nan_per_element=True,
                     exported_scales=False)
    res = _quantize_tiles(x, scheme, sr, seed)
    # The engine applied scale_inv per block (all equal); it is one FP32 value per tensor.
    return Quantized(res.x_hat, res.report, None, float(used.get("scale_inv", 1.0)))


def fp8_block(x, *, block=(1, FP8_BLOCK), elem: str = "e4m3", pow2_scales: bool = False,
              sr: bool = False, seed=0) -> Quantized:
    """DeepSeek-V3-style FP8 (arXiv:2412.19437 §3.3): FP32 scale S_b = amax_b / 448 per 1×128
    (activations, gradients) or 128×128 (weights) block of the last two axes;
    x̂ = e4m3(x / S_b) · S_b.
    pow2_scales rounds S_b up to a power of two (no saturation), like TE's power-of-two scale
    option for its FP8 block recipe."""
    h, w = (1, int(block)) if np.ndim(block) == 0 else (int(block[0]), int(block[1]))
    fmt = get_format(elem)

    def scales(amax_b, amax_t):
        s = amax_b / F32(fmt.max_finite)
        if pow2_scales:
            s = np.where(amax_b > 0, to_ue8m0(s, "ceil"), F32(0))
        return s, np.where(s > 0, s, F32(1.0)), True, None

    label = _label(f"fp8_block_{h}x{w}", "" if fmt is E4M3 else fmt.name,
                   "pow2" if pow2_scales else "", "sr" if sr else "")
    return _quantize_tiles(x, _Scheme(label, fmt, h, w, scales, 4, 0), sr, seed)


def bf16(x) -> Quantized:
    """BF16 (RNE) reference row; non-finite inputs give NaN like the other formats."""
    x = np.asarray(x, dtype=F32)
    x_hat = round_to_bf16(x)
    x_hat = np.where(np.isfinite(x), x_hat, F32(np.nan))
    st = _Stats()
    st.saturated = int(np.count_nonzero(np.isinf(x_hat)))
    x_hat = np.where(np.isinf(x_hat), F32(np.nan), x_hat).astype(F32)   # overflow is an error too
    xr, xhr = x.ravel(), x_hat.ravel()
    for i in range(0, xr.size, CHUNK_ELEMENTS):
        st.add(xr[i:i + CHUNK_ELEMENTS], xhr[i:i + CHUNK_ELEMENTS])
    return Quantized(x_hat, st.report("bf16", x.size, 2.0))


FORMATS: dict[str, Callable[..., Quantized]] = {
    "bf16": bf16, "fp8": fp8, "fp8_block": fp8_block, "mxfp8": mxfp8, "nvfp4": nvfp4,
    "mxfp4": mxfp4,
}


def quantize(x, fmt: str, **options) -> Quantized:
    """Dispatch by format name (FORMATS) with the format's keyword options."""
    try:
        fn = FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}") from None
    return fn(x, **options)


def quantization_error(x, fmt: str, **options) -> dict:
    """The report dict of quantize(x, fmt, **options)."""
    return quantize(x, fmt, **options).report


def compare_formats(x, *, seed=0) -> list[dict]:
    """One report row per format/recipe variant on the same tensor, for a table: bf16, per-tensor
    fp8, fp8 1×128 and (2-D+) 128×128 blocks, mxfp8, nvfp4 (1D, 2D, RHT, SR), mxfp4 (plain, RHT).
    Variants that the shape does not allow (2D on a vector, RHT on a last axis not a multiple of
    16) are left out."""
    x = np.asarray(x, dtype=F32)
    specs: list[tuple[str, dict]] = [("bf16", {}), ("fp8", {}), ("fp8_block", {})]
    if x.ndim >= 2:
        specs.append(("fp8_block", {"block": (FP8_BLOCK, FP8_BLOCK)}))
    specs += [("mxfp8", {}), ("nvfp4", {})]
    if x.ndim >= 2:
        specs.append(("nvfp4", {"scaling": "2d"}))
    rht_ok = x.ndim >= 1 and x.shape[-1] % NVFP4_BLOCK == 0
    if rht_ok:
        specs.append(("nvfp4", {"rht": True}))
    specs += [("nvfp4", {"sr": True, "seed": seed}), ("mxfp4", {})]
    if rht_ok:
        specs.append(("mxfp4", {"rht": True}))
    return [quantization_error(x, name, **opts) for name, opts in specs]


REPORT_COLUMNS = ("format", "snr_db", "rel_error", "max_abs_error", "frac_flushed_to_zero",
                  "frac_saturated", "bytes_per_element")


def report_table(rows: list[dict], columns=REPORT_COLUMNS) -> str:
    """Plain-text table of report rows (e.g. from compare_formats)."""
    from perfmodel.report.tables import format_table

    def cell(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    return format_table(list(columns), [[cell(r[c]) for c in columns] for r in rows])
