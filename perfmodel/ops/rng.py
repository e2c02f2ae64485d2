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
