"""SOLAR's speed-of-light convention (NVlabs/SOLAR@d3524c44, solar/perf/perf_model.py), the bound
SOL-ExecBench publishes for each workload.

    T_SOL = max(compute, memory)
    compute = Σ tensor-core MACs / MAC-per-cycle of their precision / clock
    memory  = DRAM bytes of the graph's inputs and outputs / DRAM bytes-per-cycle / clock

* Only tensor-core MACs count (matmuls, convolutions, attention's two products, einsums).
  Elementwise and reduction work on the CUDA cores is left out: SOLAR reports it but excludes
  it, since including it "would inflate SOL by 10–34,000×" (NVlabs/SOLAR, its SOL guide).
* MACs run at their precision's tensor rate: 16-bit (BF16/FP16) for BF16, FP16 and FP32 problems
  (the leaderboard config prices all-FP32 problems at the 16-bit rate: measured FP32 baselines
  "sustain 1.2–1.6 PFLOPS", above the TF32 peak), FP8 at twice it, NVFP4 at four times.
* Bytes are the "fused" variant: every input and output of the whole problem read or written
  once, intermediates on chip; block-scale factors are not counted (NVlabs/SOLAR, its quantization notes).
  Index-driven tensors count the bytes the indices touch (the KV pages of a paged cache, the
  rows of an embedding table, the experts a router activates), as SOLAR's traced graph reads them.
* `B200_SOLAR` is SOLAR's arch file configs/arch/B200.yaml (the SOL-ExecBench target), at the
  harness's locked 1.5 GHz: 603,751 BF16 MAC/cycle (148 SMs × 4096, less a rounding),
  FP8 1,207,501, NVFP4 2,415,000, DRAM 5111.6 B/cycle (≈ 7.67 TB/s).
* `arch_from_hardware` applies the same convention to any perfmodel GPU: its datasheet dense
  tensor peaks (at a locked SM clock when one is set) and its peak HBM bandwidth.

The published values add a 0.4 µs floor to the roofline on the L1, L2 and FlashInfer-Bench
GEMM/norm rows; the Quant rows and FlashInfer-Bench's attention and MoE rows carry none
(perfmodel/sol/data/SOURCES.md; the cross-check in `coverage` confirms it
row by row). The floor is a property of the published table, not of the convention, so the bound
itself never includes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from perfmodel.hardware import Hardware

PRECISIONS = ("fp16", "fp8", "nvfp4")  # SOLAR's tensor-core rate classes used by the benchmark
PUBLISHED_FLOOR_S = 0.4e-6


@dataclass(frozen=True)
class SolarArch:
    """Tensor-core MAC rates per precision and the DRAM rate, per cycle at one clock."""

    name: str
    clock_hz: float
    mac_per_cycle: Mapping[str, float]
    dram_bytes_per_cycle: float
    source: str = ""

    def mac_per_s(self, precision: str) -> float:
        return self.mac_per_cycle[precision] * self.clock_hz

    @property
    def dram_bytes_per_s(self) -> float:
        return self.dram_bytes_per_cycle * self.clock_hz


B200_SOLAR = SolarArch(
    name="B200 (SOLAR arch file)", clock_hz=1.5e9,
    mac_per_cycle={"fp16": 603_751.0, "fp8": 1_207_501.0, "nvfp4": 2_415_000.0},
    dram_bytes_per_cycle=5111.6,
    source="NVlabs/SOLAR@d3524c44 configs/arch/B200.yaml")


def arch_from_hardware(hw: Hardware) -> SolarArch:
    """SOLAR's convention on a perfmodel GPU: dense tensor peaks at the tensor clock (capped by a
    locked SM clock), peak HBM bandwidth."""
    clock = hw.tensor_peak_clock_hz
    rates = {}
    for precision, dtype in (("fp16", "bf16"), ("fp8", "fp8"), ("nvfp4", "nvfp4")):
        if dtype in hw.tensor_flop_per_sm_per_clk:
            rates[precision] = hw.tensor_flop_per_sm_per_clk[dtype] * hw.sm_count / 2.0
    lock = f", SM clock locked at {hw.sm_clock_hz / 1e6:.0f} MHz" if hw.sm_clock_hz else ""
    return SolarArch(name=f"{hw.name}{lock}", clock_hz=clock, mac_per_cycle=rates,
                     dram_bytes_per_cycle=hw.hbm_peak_bandwidth_bytes_per_s / clock,
                     source=hw.path or hw.name)


def precision_of(dtype: str) -> str:
    """SOLAR's rate class of a GEMM input type: nvfp4/mxfp4 → nvfp4, FP8 → fp8, else 16-bit."""
    d = dtype.lower()
    if d in ("nvfp4", "mxfp4"):
        return "nvfp4"
    if d.startswith("fp8") or d in ("mxfp8", "int8"):
        return "fp8"
    return "fp16"


@dataclass(frozen=True)
class SolarBound:
    """SOLAR's bound of one workload: the compute and memory times and the larger."""

    compute_s: float
    memory_s: float
    macs: Mapping[str, float]
    dram_bytes: float
    arch: str

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "tensor" if self.compute_s >= self.memory_s and self.compute_s > 0 else "dram"

    def to_dict(self) -> dict:
        return {"sol_time_s": self.time_s, "compute_s": self.compute_s,
                "memory_s": self.memory_s, "bound": self.bound, "macs": dict(self.macs),
                "dram_bytes": self.dram_bytes, "arch": self.arch}


def solar_bound(macs: Mapping[str, float], dram_bytes: float, arch: SolarArch) -> SolarBound:
    """max(Σ MACs / rate, bytes / DRAM rate) on `arch`."""
    compute = 0.0
    for precision, n in macs.items():
        if n <= 0:
            continue
        if precision not in arch.mac_per_cycle:
            from perfmodel.errors import InputError
            raise InputError(f"{arch.name}: no tensor-core rate for {precision} (has "
                             f"{', '.join(arch.mac_per_cycle)})")
        compute += n / arch.mac_per_s(precision)
    return SolarBound(compute, dram_bytes / arch.dram_bytes_per_s, dict(macs), dram_bytes,
                      arch.name)


def published_floor_s(subset: str, op_kind: str) -> float:
    """The floor the published table adds to a problem's rows (module docstring)."""
    if subset in ("L1", "L2"):
        return PUBLISHED_FLOOR_S
    if subset == "FlashInfer-Bench" and op_kind in ("gemm", "norm"):
        return PUBLISHED_FLOOR_S
    return 0.0
