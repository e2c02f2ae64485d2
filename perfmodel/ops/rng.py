"""Philox4x32 random-number generation (dropout masks, stochastic rounding).

Instruction mix per Philox call, from the algorithm (Salmon et al., SC11 "Parallel random
numbers: as easy as 1, 2, 3") and its SASS lowering (docs/hardware-notes.md §6.2):
  * 2 × `mul.wide.u32` per round → IMAD.WIDE.U32 on the FMA-heavy pipe;
  * 2 three-input XORs per round → 1 LOP3 each when folded (FA4 philox.py), 2 LOP3 unfolded;
  * 2 key-bump IADD3 per round after the first, unless round keys are precomputed and shared
    (warp-uniform seed; FA4 `philox_precompute_round_keys`);
  * ~4 ALU ops of counter/offset setup per call.
One call yields 128 random bits. Consumers then compare/convert per element: a byte or bit mask
needs an integer compare and pack (ALU); a float needs I2F (XU) + FFMA (cuRAND curand_uniform).

Fused dropout (`fused_dropout_work`, used by attention) prices the same calls where they run: on
the warps that already compute the softmax, sharing their issue slots, their FMA lanes (the
FMA-heavy half IMAD.WIDE runs on is half of the FMA pipe, docs/hardware-notes.md §4.1) and their
registers. A call is one dependency chain of R rounds, IMAD.WIDE → LOP3 each; the registers left
beside the score fragment decide how many chains a warp keeps in flight, and too few chains per
scheduler leave issue slots idle (`philox_chain_cycles`, `chains_in_flight`). The backward
regenerates the same mask from the saved (seed, offset) (FlashAttention-2 flash_bwd_kernel.h,
FA4 PR 2597 "bit-identical to FA2") and applies it twice: to P for dV and to dP for dS. When
not even one chain fits beside the fragments (`rng_on_critical_path`), the mask cannot be
generated ahead of the tile it masks and the RNG work lies on the warps' critical path; the
attention op then prices it serial with the MMAs (ops/attention/op.py RNG_SERIAL_RESOURCES).
"""
from __future__ import annotations

from perfmodel.demand import Demand, LaunchShape, add_work
from perfmodel.ops.base import Op, Param, positive

GENERATOR_ROUNDS = {"philox4x32-7": 7, "philox4x32-10": 10}
BITS_PER_CALL = 128
SETUP_ALU_PER_CALL = 4
OUTPUT_BITS = {"mask_bits": 1, "bytes": 8, "float": 32}


def philox_work(calls: float, rounds: int, lop3_fold: bool = True,
                precomputed_keys: bool = False) -> dict[str, float]:
    """Thread-ops per pipe for `calls` Philox4x32-R calls (no consumer work)."""
    imad_wide = 2 * rounds
    lop3 = 2 * rounds * (1 if lop3_fold else 2)
    key_bumps = 0 if precomputed_keys else 2 * (rounds - 1)
    return {"fma_heavy": calls * imad_wide,
            "alu": calls * (lop3 + key_bumps + SETUP_ALU_PER_CALL)}


# Dependent-issue latency of the fixed-latency integer pipes, in SM clocks: IMAD.WIDE on the
# FMA-heavy pipe and LOP3/IADD3 on the ALU. Assumed 4 each (Jia et al., "Dissecting the NVIDIA
# Volta GPU Architecture via Microbenchmarking", arXiv:1804.06826, and the Turing follow-up
# arXiv:1903.07486, measure 4-5 clocks for integer and FP32 arithmetic; not measured on Hopper or
# Blackwell, range 4-8). Cross-check: a Philox4x32-7 chain is then 7 x 8 + setup ~ 60-70 clocks,
# quack's "~70-clk waves" of serialized Philox batches on H100 (quack/rounding.py comment).
IMAD_WIDE_LATENCY_CLK = 4
LOP3_LATENCY_CLK = 4
SETUP_LATENCY_CLK = 8       # counter/offset setup before round 1 (two dependent ALU ops)
# Live registers of one Philox call in flight: the 4-word counter/state, the two 64-bit
# IMAD.WIDE products (4 registers), the 2-word key (per thread in FA2's philox.cuh; uniform
# registers once round keys are precomputed are not counted, so this is the upper end)
REGS_PER_CHAIN = 10


def philox_call_instructions(rounds: int, lop3_fold: bool = True,
                             precomputed_keys: bool = False) -> float:
    """Thread-instructions of one Philox call (each issues as one warp-instruction per warp)."""
    return sum(philox_work(1, rounds, lop3_fold, precomputed_keys).values())


def philox_chain_cycles(rounds: int, lop3_fold: bool = True) -> float:
    """SM clocks from a Philox call's first to its last instruction when nothing else stalls it:
    each round's two IMAD.WIDE (independent) feed its XORs, which feed the next round. A round's
    new words are hi ^ ctr ^ key: one LOP3 (immLut 0x96) when folded, two dependent two-input
    XORs when not (FA2 philox.cuh; FA4 flash_attn/cute/philox.py offers the fold as an option),
    so an unfolded round is one ALU latency longer."""
    xor_steps = 1 if lop3_fold else 2
    return SETUP_LATENCY_CLK + rounds * (IMAD_WIDE_LATENCY_CLK + xor_steps * LOP3_LATENCY_CLK)


def rng_on_critical_path(register_budget: float, live_registers: float) -> bool:
    """Whether fused Philox runs on the critical path of the warps that consume its mask: when
    the registers left beside the pass's fragments cannot hold even one call in flight
    (REGS_PER_CHAIN), no chain can run ahead of the data it masks (while those warps wait on the
    MMAs), so every call sits between the warps' load of a tile and their hand-off of its
    masked result; with room for a chain, the mask for the next tile can be generated while the
    MMAs run (FA4 `precompute_dropout_mask`: the bitmask's INT32 work "can overlap with FP32
    softmax on separate execution units"). FA4's backward compute warps (136 registers holding
    S/P and dP) are the case: its philox.py comment records that folding the XORs, which lets
    more chains be in flight per thread, regressed the backward by ~390 us (register pressure)."""
    return register_budget - live_registers < REGS_PER_CHAIN


def chains_in_flight(register_budget: int, live_registers: float, calls_per_thread: float) -> int:
    """Independent Philox calls one thread keeps in flight: the registers left beside what the
    kernel already holds, REGS_PER_CHAIN each; at least one (the compiler serializes, it does not
    refuse), at most the calls the thread has per tile."""
    free = register_budget - live_registers
    return int(max(1, min(max(1.0, calls_per_thread), free // REGS_PER_CHAIN)))


def fused_dropout_work(scores: float, bits_per_score: int, rounds: int, direction: str,
                       lop3_fold: bool, precomputed_keys: bool, *, rng_warps_per_sm: float,
                       register_budget: int, live_registers: float, scores_per_thread: float
                       ) -> tuple[dict[str, float], dict[str, float]]:
    """Work of dropout fused into an attention pass, and its named terms.

    `scores`: every score the pass's tiles compute (Philox runs for the whole fragment, masked
    entries included). The RNG runs on the softmax (forward) or compute (backward) warps:
    `rng_warps_per_sm` of them resident per SM, each thread with `register_budget` registers of
    which `live_registers` hold the pass's fragments, and `scores_per_thread` scores per tile.

    Returns (work per resource: fma_heavy, fma, alu, issue; terms: the counts behind it, the
    keys the Estimate's details show as `dropout`)."""
    calls = scores * bits_per_score / BITS_PER_CALL
    core = philox_work(calls, rounds, lop3_fold, precomputed_keys)
    imad = core["fma_heavy"]
    # keep/drop decision and its application (FA2 dropout.h: set.le.u32.f16x2 + AND over score
    # pairs, one instruction per score): forward to P before P·V; backward to P for dV = (P∘Z)ᵀdO
    # and again to dP for dS = P∘(Z∘dP − D)
    mask_alu = scores * MASK_APPLY_PER_SCORE[direction]
    instr_per_call = philox_call_instructions(rounds, lop3_fold, precomputed_keys)
    rng_issue = (calls * instr_per_call + mask_alu) / 32.0
    # latency floor: per scheduler (4 per SM) w warps × c chains complete per chain time L, so
    # the warp-level calls take at least calls/32 × L / (w·c) scheduler clocks; issue-equivalents
    # in the unit of the issue resource (warp-instructions over the SM's 4 schedulers)
    calls_per_thread = scores_per_thread * bits_per_score / BITS_PER_CALL
    c = chains_in_flight(register_budget, live_registers, calls_per_thread)
    w = max(rng_warps_per_sm / 4.0, 1e-9)
    chain_issue = calls / 32.0 * philox_chain_cycles(rounds, lop3_fold) / (w * c)
    work = {"fma_heavy": imad, "fma": imad, "alu": core["alu"] + mask_alu, "issue": rng_issue}
    terms = {"philox_calls": calls, "philox_imad_wide": imad, "philox_alu": core["alu"],
             "mask_alu": mask_alu, "rng_issue": rng_issue, "chain_issue_floor": chain_issue,
             "chains_in_flight": float(c), "rng_warps_per_scheduler": w,
             "chain_cycles": philox_chain_cycles(rounds, lop3_fold),
             "free_registers": float(register_budget - live_registers),
             "rng_on_critical_path": float(rng_on_critical_path(register_budget,
                                                                live_registers))}
    return work, terms


# Mask instructions per computed score (see fused_dropout_work)
MASK_APPLY_PER_SCORE = {"fwd": 1.0, "bwd": 2.0}


def consume_work(elements: float, output: str) -> dict[str, float]:
    """Per-element work turning random bits into the requested output."""
    if output == "float":   # I2F.U32 + FFMA scale (curand_uniform)
        return {"xu": elements, "fma": elements}
    if output == "bytes":   # byte extract/compare, 4 elements per PRMT+ISETP pair
        return {"alu": elements * 0.5}
    return {"alu": elements * (1 + 1 / 32)}  # compare per element + one ballot per 32 bits


def rng_instruction_work(elements: float, bits_per_element: int, rounds: int, output: str,
                         lop3_fold: bool = True, precomputed_keys: bool = False
                         ) -> dict[str, float]:
    """All pipe work and issue slots for generating `elements` random values."""
    calls = elements * bits_per_element / BITS_PER_CALL
    work = add_work(philox_work(calls, rounds, lop3_fold, precomputed_keys),
                    consume_work(elements, output))
    work["issue"] = sum(work.values()) / 32.0
    return work


class Rng(Op):
    """A standalone Philox kernel writing random values (e.g. a dropout mask) to HBM."""

    name = "rng"
    EXAMPLE = dict(elements=1 << 26)
    PARAMS = {
        "elements": positive("elements", "random values generated"),
        "bits_per_element": Param("int", default=8, lo=1, hi=128, unit="bits",
                                  doc="random bits consumed per element (FA2 dropout: 8)"),
        "generator": Param("choice", default="philox4x32-10", choices=tuple(GENERATOR_ROUNDS)),
        "output": Param("choice", default="bytes", choices=tuple(OUTPUT_BITS)),
        "lop3_fold": Param("bool", default=True, doc="3-input XORs fused into one LOP3"),
        "precomputed_keys": Param("bool", default=False,
                                  doc="round keys hoisted out of the per-call loop"),
    }
    SIZE_PARAMS = ("elements",)

    def demand(self, hw):
        n = float(self.elements)
        work = rng_instruction_work(n, self.bits_per_element, GENERATOR_ROUNDS[self.generator],
                                    self.output, self.lop3_fold, self.precomputed_keys)
        out_bytes = n * OUTPUT_BITS[self.output] / 8
        work["issue"] += out_bytes / 16 / 32  # one 16-byte store per thread-vector
        work["l2"] = out_bytes
        work["hbm"] = out_bytes
        calls_per_thread = 4
        elems_per_cta = 256 * calls_per_thread * BITS_PER_CALL / self.bits_per_element
        launch = LaunchShape(ctas=max(1, int(-(-n // elems_per_cta))), threads_per_cta=256,
                             registers_per_thread=40)
        return Demand(work=work, launch=launch, flop=0.0, hbm_bytes=out_bytes,
                      details={"philox_calls": n * self.bits_per_element / BITS_PER_CALL})
