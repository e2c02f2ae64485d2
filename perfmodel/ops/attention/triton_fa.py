"""llm-foundry's Triton FlashAttention as its own family (`Attention(kernel="triton_fa")`).

llm-foundry 0.4.0's MPT defaults attn_impl to "triton" (llmfoundry/models/layers/blocks.py:18,
attn_config_defaults), which runs the Triton FlashAttention it vendors in
llmfoundry/models/layers/flash_attn_triton.py (copied from flash-attention eff9fe6's
flash_attn/flash_attn_triton.py, built on the pre-MLIR Triton `triton_pre_mlir`; its docstring:
"tested on A100 only", forward + backward "slightly slower than" CUDA FlashAttention). What the
source fixes (lines of that file in the llm-foundry 0.4.0 wheel):
  * what it takes: head dims up to 128 (asserts 593, 654), FP16/BF16 (595), K and V with the
    query's heads and head dim (591-592; llm-foundry repeats K/V heads for GQA before the call,
    attention.py:448-458), no dropout (docstring 37; attention.py:417-419 raises), a causal mask
    only with as many keys as queries (attention.py:47-58 _reset_is_causal), no sliding window.
    Its MMAs run at BLOCK_HEADDIM = max(next power of 2 of d, 16) (622, 665): head dim 112
    computes 128;
  * forward (_fwd_kernel, launched 622-643): one CTA per 128-row query tile and (batch, head),
    BLOCK_M = BLOCK_N = 128 (623, 640), 4 warps at head dim <= 64 else 8 (624), num_stages=1
    (642). The causal loop stops at the diagonal key tile (129: fully masked tiles are skipped,
    the tile pairs of tiles.visited at 128 x 128) but applies its mask, `qk += tl.where(...)`
    (151-152; and the seqlen_k mask, 149-150, when the key length is not a multiple of 128), to
    every tile it visits. Per score: the mask's FADD, the row max (175), the scaled subtraction
    in the exp's argument (176), tl.exp (176), the row sum (177), P → 16 bits (201); per tile the
    output rescale (186);
  * num_stages=1: no software pipelining. Each K (135) and V (190) tile is loaded when the loop
    reaches it and the dot that reads it (147, 202) waits for it: the tile's move from L2 does
    not overlap the CTA's MMAs or softmax. Its time adds to theirs (an Overlap of efficiency 0
    around the tile work), where FA2 (cp.async, two stages) hides it;
  * tl.dot on mma.sync: the pre-MLIR Triton emits warp-level mma.sync (HMMA) on sm_80 and sm_90
    alike (wgmma came with the MLIR Triton's Hopper backend): on Hopper it runs at the GPU's
    mma.sync rate like FA2 (the op's `_mma_path`: isa.mma_sync_flop_per_sm_per_clk × FA2's
    fitted share). Its operands are read
    from shared memory with ldmatrix between the HMMAs, as FA2's are: the same partial overlap
    (MMA_SYNC_OPERAND_OVERLAP) and the same softmax overlap (the fa2 constants: one warp role
    issuing MMAs and softmax in turn);
  * backward: the autotuner (489-501) times SEQUENCE_PARALLEL False and True, both 128 x 128,
    8 warps, num_stages=1, and keeps the faster. Modelled: the sequence-parallel one, one CTA per
    128-key column and (batch, head) (568-584, grid 695-696), which keeps K and V in shared
    memory (336), walks the query tiles from the diagonal (302, 352), and per tile loads Q (358)
    and dO (404), recomputes P = exp(QKᵀ·scale − LSE) (366-397), runs dV += Pᵀ·dO (420),
    dP = dO·Vᵀ (427), dS = P·(dP − D)·scale (436), dK += dSᵀ·Q (438), dQ = dS·K (463) and adds dQ
    into an FP32 accumulator with atomics (465). Around it: D = rowsum(dO∘O)
    (_bwd_preprocess_do_o_dot, 237-258, launched 667-673), the autotuner's pre_hook zeroing the
    dQ accumulator (init_to_zero('DQ'), 485-486: PyTorch's zero_, which Triton's Autotuner.run
    calls before each launch: recalled), and dq.copy_(dq_accum) (720): four kernels. The
    sequence-parallel config is the one whose grid fills the GPU at llm-foundry's long-sequence
    micro-batches (batch·heads = 12-64 CTAs otherwise, each walking every column); at
    short sequences both move the same bytes per tile pair (dQ read, added and written instead
    of atomics).
Not modelled: a second CTA per SM (the forward at head dim <= 64: 128 threads) running its MMAs
under the first one's loads, and the loads' latency beyond their L2 bandwidth time; the ALiBi
bias MPT adds (a (1, heads, 1, keys) vector: one BLOCK_N load per tile and one FFMA per score,
153-173; the op has no bias); the store and reload of the rescale factors through global memory
at every tile (TMP, 184-185: 512 B per tile pair, a round trip on the loop's path); the
non-sequence-parallel backward config.
"""
from __future__ import annotations

import math

from perfmodel.demand import Demand, LaunchShape, Overlap, sequence_demand
from perfmodel.errors import InputError
from perfmodel.ops.attention import op as _op
from perfmodel.ops.attention.tiles import Tiling, visited
from perfmodel.ops.streaming import stream_demand
from perfmodel.units import bytes_per_element, tensor_dtype

TRITON_FA = "triton_fa"
# launch shapes (flash_attn_triton.py, llm-foundry 0.4.0): BLOCK = 128 forward (623) and both
# autotuned backward configs (491-492); forward 4 warps up to head dim 64, else 8 (624);
# backward 8 warps (491-492)
BLOCK = 128
FWD_WARPS_UP_TO_64 = 4
FWD_WARPS_ABOVE_64 = 8
BWD_WARPS = 8
MAX_HEAD_DIM = 128  # asserts 593, 654
MIN_BLOCK_HEADDIM = 16  # BLOCK_HEADDIM = max(next_power_of_2(d), 16), 622, 665
# Registers per thread: the pre-MLIR Triton caps none and the kernel spills at head dim 128
# (docstring 22: "reducing register spilling"); assumed at the per-thread maximum, as FA2's
TRITON_FA_REGISTERS = 255
# CUDA-core work per score beyond the masks, counted from the source (no bias):
#   forward: row max (175), the FFMA of qk·scale − m (176), tl.exp's multiply by log2 e ahead
#     of MUFU.EX2 (176: tl.exp; the op's FA2 count, SOFTMAX_FMA_PER_SCORE, has one FFMA for
#     scale and subtraction, FA2 calling exp2 on a log2-scaled argument), the row sum (177), the
#     cvt of P to 16 bits (201): 5;
#   backward: the FFMA of qk·scale − LSE (395), tl.exp's log2 e multiply (395), P → 16 bits
#     (420), dP − D, · P, · scale and dS → 16 bits (436): 7.
# tl.exp lowering as ex2.approx of x·log2 e is the pre-MLIR compiler's (its source is not on
# PyPI and was not read: assumed; a full-precision expf would cost more).
SOFTMAX_FMA_PER_SCORE = {"fwd": 5.0, "bwd": 7.0}
# Each mask the kernel applies, on every tile it visits (causal: fwd 151-152, bwd 370-371;
# key length not a multiple of 128: fwd 149-150, bwd 368-369): an integer compare and a select
# on the ALU (as the op's masked tiles), plus in the forward an FADD (`qk += tl.where(..., 0,
# -inf)`); the backward selects in place (`qk = tl.where(..., qk, -inf)`)
MASK_ALU_PER_SCORE = 2.0
MASK_FMA_PER_SCORE = {"fwd": 1.0, "bwd": 0.0}


def padded_head_dim(d: int) -> int:
    """BLOCK_HEADDIM (622, 665): the head dim the tiles and MMAs are built at."""
    return max(MIN_BLOCK_HEADDIM, 1 << (d - 1).bit_length())


def warp_grid(warps: int, m: int, n: int) -> tuple[int, int]:
    """Warps along M and N of a tl.dot's M × N output: the pre-MLIR Triton's mma layout doubles
    them along M, then N, "as square as possible" (lib/codegen/analysis/layout.cc, recalled: not
    read), each warp at least one m16n8 MMA: 4 warps 2 × 2, 8 warps 4 × 2 on 128-wide tiles."""
    wm = wn = 1
    while wm * wn < warps:
        before = (wm, wn)
        if wm * wn < warps and wm * 2 <= m // 16:
            wm *= 2
        if wm * wn < warps and wn * 2 <= n // 8:
            wn *= 2
        if (wm, wn) == before:
            break
    return wm, wn


def dot_smem_elements(m: int, n: int, k: int, warps: int) -> float:
    """Shared-memory elements a warp-tiled tl.dot (M × N, depth K) reads with ldmatrix: its A
    operand (M × K) once per warp along N, its B operand (K × N) once per warp along M."""
    wm, wn = warp_grid(warps, m, n)
    return m * k * wn + n * k * wm


def check(op) -> None:
    """What the kernel takes (module docstring); InputError naming the parameter otherwise."""
    d, dv = op.head_dim, op.head_dim_v or op.head_dim
    if d > MAX_HEAD_DIM:
        raise InputError(f"head_dim: attention kernel 'triton_fa' takes head dims up to "
                         f"{MAX_HEAD_DIM} (flash_attn_triton.py asserts d <= 128), got {d}")
    if dv != d:
        raise InputError(f"head_dim_v: attention kernel 'triton_fa' needs V's head dim equal "
                         f"to head_dim ({d}), got {dv}")
    if tensor_dtype(op.dtype) not in ("fp16", "bf16"):
        raise InputError(f"dtype: attention kernel 'triton_fa' runs fp16 or bf16, got "
                         f"{op.dtype}")
    if (op.kv_heads or op.heads) != op.heads:
        raise InputError(f"kv_heads: attention kernel 'triton_fa' takes as many K/V heads as "
                         f"query heads ({op.heads}; llm-foundry repeats K/V before it), got "
                         f"{op.kv_heads}")
    if op.causal and (op.seq_kv or op.seq_q) != op.seq_q:
        raise InputError(f"seq_kv: attention kernel 'triton_fa' masks causally only with as "
                         f"many keys as queries (seq_q {op.seq_q}), got {op.seq_kv}")
    for name, bad in (("dropout_p", op.dropout_p > 0), ("window", op.window is not None),
                      ("shared_kv", op.shared_kv),
                      ("kv_dtype", op.kv_dtype is not None
                       and tensor_dtype(op.kv_dtype) != tensor_dtype(op.dtype))):
        if bad:
            raise InputError(f"{name}: attention kernel 'triton_fa' supports none "
                             f"(llm-foundry's Triton FlashAttention), got {getattr(op, name)}")


def triton_fa_tiling(op, direction: str) -> Tiling:
    """The pass's grid: one CTA per 128-row query tile (forward) or 128-key column (backward,
    sequence-parallel) and (batch, head); the tile pairs of a 128 × 128 causal walk."""
    seq_kv = op.seq_kv or op.seq_q
    warps = (BWD_WARPS if direction == "bwd" else FWD_WARPS_UP_TO_64
             if op.head_dim <= 64 else FWD_WARPS_ABOVE_64)
    pairs_per_head, scores = visited(op.seq_q, seq_kv, op.causal, None, BLOCK, BLOCK)
    q_tiles, kv_tiles = math.ceil(op.seq_q / BLOCK), math.ceil(seq_kv / BLOCK)
    per_head_ctas = q_tiles if direction == "fwd" else kv_tiles
    # a causal grid's CTAs are unequal: the busiest walks every tile of its row (column)
    longest = kv_tiles if direction == "fwd" else q_tiles
    imbalance = max(0.0, longest / (pairs_per_head / per_head_ctas) - 1)
    heads = op.batch * op.heads
    return Tiling(BLOCK, BLOCK, BLOCK, warps * 32, TRITON_FA_REGISTERS, tile_heads=op.heads,
                  pairs=pairs_per_head * heads, scores=float(scores) * heads,
                  ctas=max(1, heads * per_head_ctas), imbalance=imbalance, decode=False,
                  kv_splits=1)


def triton_fa_pass(op, hw, direction: str) -> Demand:
    """One pass (forward, or backward with its three side kernels) of the Triton kernel."""
    check(op)
    t = triton_fa_tiling(op, direction)
    d, seq_kv = op.head_dim, op.seq_kv or op.seq_q
    dp = padded_head_dim(d)
    b = bytes_per_element(op.dtype)
    tensor = f"tensor:{tensor_dtype(op.dtype)}"
    warps = t.threads // 32
    tile_scores = t.tile_scores
    masks = int(op.causal) + int(seq_kv % BLOCK != 0)
    # the MMAs at BLOCK_HEADDIM: QKᵀ and PV forward, the five backward dots (op's
    # _mma_flop_per_score with d = dv = BLOCK_HEADDIM), at FA2's mma.sync rate
    mma = (2.0 * (dp + dp) if direction == "fwd" else 2.0 * (3 * dp + 2 * dp)) * tile_scores
    work: dict[str, float] = {tensor: mma / op._mma_path(hw, "fa2")}
    work["xu"] = tile_scores
    work["fma"] = (SOFTMAX_FMA_PER_SCORE[direction] + masks * MASK_FMA_PER_SCORE[direction]) \
        * tile_scores
    work["alu"] = (_op.SOFTMAX_ALU_PER_SCORE + masks * MASK_ALU_PER_SCORE) * tile_scores
    n = t.bm
    if direction == "fwd":
        work["fma"] += t.pairs * n * dp  # the output rescale per tile (186)
        # ldmatrix reads of QKᵀ (147) and PV (202), the K and V tiles stored to shared memory
        # from their loads, and P stored there for the PV dot (the pre-MLIR Triton's dot reads
        # both operands from shared memory: its copy-to-shared pass, recalled)
        per_pair = (dot_smem_elements(n, n, dp, warps) + dot_smem_elements(n, dp, n, warps)
                    + 2 * n * dp + n * n)
    else:
        # the five dots (366, 420, 427, 438, 463), Q and dO stored from their loads, P and dS
        # stored for the dots that read them
        per_pair = (dot_smem_elements(n, n, dp, warps) + dot_smem_elements(n, dp, n, warps)
                    + dot_smem_elements(n, n, dp, warps) + dot_smem_elements(n, dp, n, warps)
                    + dot_smem_elements(n, dp, n, warps) + 2 * n * dp + 2 * n * n)
    work["smem"] = t.pairs * per_pair * b
    work["issue"] = (work["fma"] + work["alu"] + work["xu"]) / 32.0
    io = _memory(op, t, direction)
    work["hbm"], work["l2"] = io["hbm"], io["l2"]
    # shared memory of a CTA: the Q tile (or K and V, backward) held for the loop, one buffer
    # per operand loaded in it (num_stages=1), P (and dS) for the dots
    smem = ((n * dp + 2 * n * dp + n * n) if direction == "fwd"
            else (4 * n * dp + 2 * n * n)) * b
    launch = LaunchShape(ctas=t.ctas, threads_per_cta=t.threads, registers_per_thread=t.registers,
                         smem_per_cta_bytes=min(hw.smem_per_cta_bytes, int(smem)),
                         # one tile load in flight at a time: K or V forward, Q then dO backward
                         bytes_in_flight_per_cta=n * d * b)
    details = {"kernel": TRITON_FA, "direction": direction, "tile_pairs": t.pairs,
               "key_tile": t.bn, "decode": False, "kv_splits": 1, "block_headdim": dp}
    main = Demand(work=work, launch=launch, flop=op._mma_flop_per_score(direction) * t.scores,
                  hbm_bytes=io["hbm"], overlap=overlap(direction, tensor),
                  cta_dram_round_trips=_op.CTA_ROUND_TRIPS, cta_imbalance=t.imbalance,
                  details=details)
    if direction == "fwd":
        return main
    return sequence_demand((*_bwd_pre_kernels(op, io, b), main, _bwd_dq_copy(io)),
                           launch_from=2, flop=main.flop, details=details)


def overlap(direction: str, tensor: str) -> Overlap:
    """The MMAs with their ldmatrix loads (FA2's partial overlap), with the softmax on the CUDA
    cores (FA2's overlap per pass), and around both the tile loads from L2, serial with them
    (num_stages=1: efficiency 0)."""
    mmas = Overlap((tensor,), ("smem",), _op.MMA_SYNC_OPERAND_OVERLAP)
    eff = (_op.SOFTMAX_OVERLAP["fa2"] if direction == "fwd"
           else _op.DESIGN_OVERLAP[("fa2", "bwd")])
    return Overlap(Overlap(mmas, ("xu", "fma", "alu", "issue"), eff), ("l2",), 0.0)


def _memory(op, t: Tiling, direction: str) -> dict[str, float]:
    """HBM and L2 bytes of the main kernel (and the tensors the side kernels stream)."""
    d = op.head_dim
    b = bytes_per_element(op.dtype)
    rows = op.batch * op.heads
    q = rows * op.seq_q * d * b
    kv = rows * (op.seq_kv or op.seq_q) * 2 * d * b
    lse = rows * math.ceil(op.seq_q / BLOCK) * BLOCK * 4.0  # seqlen_q_rounded (617, 655)
    if direction == "fwd":
        # Q once per CTA, K and V once per tile pair (135, 190), O and LSE written (219, 225)
        return {"hbm": q + kv + q + lse,
                "l2": q + t.pairs * t.bn * 2 * d * b + q + lse}
    dq_accum = q * 4 / b
    # K, V once per CTA (336); per tile pair Q, dO (358, 404), LSE and D (393, 433) loaded and
    # the FP32 dQ tile added with atomics (465: read and written in L2); dK, dV written
    tiles = t.pairs * t.bm
    l2 = (kv + tiles * 2 * d * b + tiles * 2 * 4.0 + tiles * d * 4.0 * 2 + kv)
    hbm = q + kv + q + 2 * lse + dq_accum + kv
    return {"hbm": hbm, "l2": l2, "q": q, "o": q, "lse": lse, "dq_accum": dq_accum}


def _bwd_pre_kernels(op, io: dict[str, float], b: float) -> tuple[Demand, Demand]:
    """D = rowsum(dO∘O) (237-258) and the autotuner's pre_hook zeroing the FP32 dQ
    accumulator (485-486)."""
    pre = stream_demand(io["o"] / b, read_bytes=2 * io["o"], write_bytes=io["lse"],
                        per_element={"fma": _op.BWD_PREPROCESS_FMA_PER_ELEMENT},
                        element_bytes=b, flop=0.0,
                        details={"part": "bwd preprocess: D = rowsum(dO∘O)"})
    zero = stream_demand(io["dq_accum"] / 4, read_bytes=0.0, write_bytes=io["dq_accum"],
                         per_element={}, element_bytes=4.0, flop=0.0,
                         details={"part": "bwd: zero the FP32 dQ accumulator (pre_hook)"})
    return pre, zero


def _bwd_dq_copy(io: dict[str, float]) -> Demand:
    """dq.copy_(dq_accum) (720): the FP32 accumulator converted into dQ."""
    return stream_demand(io["dq_accum"] / 4, read_bytes=io["dq_accum"], write_bytes=io["q"],
                         per_element={"fma": _op.BWD_POSTPROCESS_FMA_PER_ELEMENT},
                         element_bytes=4.0, flop=0.0,
                         details={"part": "bwd postprocess: dQ FP32 → input dtype"})

