"""Hardware specs: strict loading of hwspecs/*.yaml into a frozen `Hardware` with derived rates.

A spec file holds quantities as `{value, source|derivation|measured|assumed, range?, note?}`,
or as `{fitted: KEY, ...}` without a value for a fitted constant, whose one home is
perfmodel/fitted.yaml (the loader takes the value from there); the loader checks every key
against `SCHEMA` (unknown or missing keys, types, ranges, unresolved source ids) and reports
every problem with file and key path. Names resolve case-insensitively through file names,
`aliases` and the driver's `device_names`.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from perfmodel import fitted, yamlio
from perfmodel.errors import InputError, show, where
from perfmodel.spec_headers import builtin_spec_dir, header_names
from perfmodel.units import tensor_dtype

SCHEMA_VERSION = 1
ARCHITECTURES = ("ampere", "hopper", "blackwell")
# `fitted` names a perfmodel/fitted.yaml key, the value's one home (_fitted_value); quantities only
PROVENANCE_KINDS = ("fitted", "source", "derivation", "measured", "assumed")
from perfmodel.units import TENSOR_DTYPES  # noqa: E402 - the tensor-core dtypes (one list)
PIPES = ("fma", "fma_heavy", "alu", "xu", "fp64", "lsu")
# Tensor-core instruction families (PTX ISA): Ampere's warp-level mma.sync, Hopper's warpgroup
# wgmma (sm_90a), Blackwell's tcgen05 with tensor memory and 2-SM pairs (sm_100a)
MMA_INSTRUCTIONS = ("mma_sync", "wgmma", "tcgen05")
BLOCK_SCALED_KINDS = ("mxfp8", "nvfp4", "mxfp4")
# dtypes Ampere-style mma.sync takes (PTX ISA: m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 s8 and,
# from sm_89, e4m3/e5m2)
MMA_SYNC_DTYPES = ("fp16", "bf16", "tf32", "int8", "fp8")


@dataclass(frozen=True)
class Q:
    """Schema entry for one quantity: bounds, integer-ness, optional."""

    lo: float
    hi: float
    integer: bool = False
    optional: bool = False


@dataclass(frozen=True)
class F:
    """Schema entry for one ISA capability: a `choice` among names, a `flag` (true/false) or a
    `set` of names (a list)."""

    kind: str
    choices: tuple[str, ...] = ()
    optional: bool = False


# Key tree of a spec file. Dicts are sections; Q are quantities. Bounds reject typos of orders
# of magnitude (a clock in MHz, bandwidth in GB/s), not plausible-but-wrong values.
SCHEMA: dict[str, Any] = {
    "sm_count": Q(1, 1024, integer=True),
    "clocks": {
        "boost_clock_hz": Q(1e8, 5e9),
        "tensor_clock_hz": Q(1e8, 5e9),
        "tensor_sustained_fraction": Q(0.3, 1.0),
        "tensor_power_exponent": Q(0.0, 1.0),
        "tensor_power_exponent_fp4": Q(0.0, 1.0, optional=True),
    },
    # at least half an operation per SM per clock: every SM since Kepler runs each of these
    # instruction classes in hardware (the narrowest, FP64 on B300 and consumer parts, 2 per
    # clock); a zero or denormal rate would make an op's time infinite or absurd
    "pipes_per_sm_per_clk": {p: Q(0.5, 1024) for p in PIPES},
    "issue_per_sm_per_clk": Q(1, 16, integer=True),
    "tensor_flop_per_sm_per_clk": {
        d: Q(1, 1e6, optional=d not in ("fp16", "bf16", "tf32", "int8")) for d in TENSOR_DTYPES
    },
    "sm_resources": {
        "registers_per_sm": Q(1024, 1 << 20, integer=True),
        "max_registers_per_thread": Q(16, 1024, integer=True),
        "max_warps_per_sm": Q(1, 256, integer=True),
        "max_ctas_per_sm": Q(1, 256, integer=True),
        "max_threads_per_cta": Q(32, 4096, integer=True),
        # at least the 48 KiB every CUDA GPU has given a CTA since compute capability 2.0: the
        # kernels modelled stage a 32 KiB epilogue tile there (ops/gemm.py), and below it a
        # kernel's shared memory came out 0 (a division by zero in the occupancy)
        "smem_per_sm_bytes": Q(48 << 10, 1 << 24, integer=True),
        "smem_per_cta_bytes": Q(48 << 10, 1 << 24, integer=True),
        "smem_bytes_per_clk": Q(1, 4096),
        "tmem_per_sm_bytes": Q(0, 1 << 24, integer=True, optional=True),
    },
    "l2": {
        "capacity_bytes": Q(1e5, 1e10),
        "bandwidth_bytes_per_s": Q(1e11, 1e15),
    },
    "hbm": {
        "capacity_bytes": Q(1e9, 1e13),
        "peak_bandwidth_bytes_per_s": Q(1e10, 1e14),
        "achievable_fraction": Q(0.3, 1.0),
        "latency_s": Q(1e-8, 1e-5),
    },
    "links": "links",  # validated by _check_links: name -> {bandwidth_bytes_per_s, latency_s}
    # GPUs that reach one another over NVLink (an HGX/DGX board: 8; a GB200 NVL72 rack: 72; up
    # to 576 in one NVLink 5 domain); a group larger than this crosses `links.network`
    # NVLS: the NVSwitches reduce (NVLink SHARP, NVSwitch gen3+), so NCCL can run its NVLS
    # all-reduce inside the domain; absent means false. host_gpus: GPUs under one host OS (a
    # GB200/GB300 compute tray: 4), where the domain spans hosts; absent means the whole domain
    # is one host (an HGX/DGX board). host_cpu: the host's CPU family (HOST_CPUS), whose speed
    # sets the engines' eager call paths; absent means an x86 host (HGX/DGX boards)
    "topology": {"nvlink_domain_gpus": Q(1, 576, integer=True), "nvls": F("flag", optional=True),
                 "host_gpus": Q(1, 576, integer=True, optional=True),
                 "host_cpu": F("choice", ("x86", "grace"), optional=True)},
    "kernel_launch_s": Q(1e-7, 1e-4),
    "graph_kernel_gap_s": Q(0.0, 1e-4),
    "power": {"tdp_w": Q(10, 5000)},
    # What the instruction set offers: ops branch on these, never on the architecture's name,
    # so a new GPU is a new spec file (docs/hwspec-format.md "isa")
    "isa": {
        "mma_instruction": F("choice", MMA_INSTRUCTIONS),
        "packed_fp32": F("flag"),              # FFMA2/FADD2: two lanes' FP32 work per instruction
        "block_scaled_mma": F("set", BLOCK_SCALED_KINDS),  # MMAs that apply block scales
        "stochastic_rounding": F("flag"),      # cvt.rs: hardware stochastic rounding
        "fp8_convert_pipe": F("choice", PIPES, optional=True),  # pipe of cvt…e4m3x2.f32
        # Ampere's warp-level mma.sync (SASS HMMA), which every GPU since Ampere still runs: its
        # own dense rate per SM per clock, FLOP, beside the native instruction's rate in
        # tensor_flop_per_sm_per_clk (FlashAttention-2 issues it on every GPU)
        "mma_sync_flop_per_sm_per_clk": {
            d: Q(1, 1e6, optional=d not in ("fp16", "bf16")) for d in MMA_SYNC_DTYPES},
    },
}
LINK_SCHEMA = {"bandwidth_bytes_per_s": Q(1e8, 1e14), "latency_s": Q(1e-8, 1e-3),
               # optional, for NCCL's collectives (perfmodel/ops/nccl.py): the latency of one ring
               # hop of each NCCL protocol, and the share of the rate data can use
               **{f"{p}_latency_s": Q(1e-8, 1e-3, optional=True)
                  for p in ("ll", "ll128", "simple")},
               # optional: the measured fixed time of NCCL's ring LL collective on this link, in
               # place of tuning.cc's baseLat[RING][LL]; every base latency scales with it
               "nccl_base_latency_s": Q(1e-7, 1e-3, optional=True),
               "achievable_fraction": Q(0.1, 1.0, optional=True)}
HEADER_KEYS = ("schema_version", "name", "architecture", "compute_capability", "aliases",
               "device_names", "sources")


@dataclass(frozen=True)
class Quantity:
    """A spec number with its provenance, as written in the file (for `hw show` and audits)."""

    value: float
    provenance: dict[str, str]
    range: tuple[float, float] | None = None
    note: str = ""


@dataclass(frozen=True)
class Capability:
    """A declared ISA capability with its provenance (for `hw show` and audits)."""

    value: "str | bool | tuple[str, ...]"
    provenance: dict[str, str]
    note: str = ""


@dataclass(frozen=True)
class Link:
    bandwidth_bytes_per_s: float  # per direction, per GPU
    latency_s: float
    achievable_fraction: float = 1.0  # share of the rate a transfer's data can use
    ll_latency_s: float | None = None  # one ring hop of NCCL's LL, LL128, Simple protocols
    ll128_latency_s: float | None = None
    simple_latency_s: float | None = None
    # measured fixed time of NCCL's ring LL collective here (perfmodel/ops/nccl.py base_s);
    # None: tuning.cc's baseLat
    nccl_base_latency_s: float | None = None

    def nccl_base_steps(self, base_us: float, ring_ll_base_us: float) -> float | None:
        """An NCCL base latency of tuning.cc's `base_us`, scaled by this link's measured ring LL
        base over tuning.cc's (`ring_ll_base_us`), in steps of `latency_s`; None where the spec
        measures no base (perfmodel/ops/nccl.py base_steps)."""
        if self.nccl_base_latency_s is None:
            return None
        return base_us / ring_ll_base_us * self.nccl_base_latency_s / self.latency_s

    def protocol_step(self, protocol: str) -> float:
        """One hop of NCCL protocol `protocol` (ll, ll128, simple) in steps of `latency_s`, the
        unit the engine charges link steps in; 1 where the spec gives no latency for it."""
        hop = getattr(self, f"{protocol}_latency_s")
        return 1.0 if hop is None else hop / self.latency_s

    @property
    def step_bytes(self) -> float:
        """The bytes the link carries at its full rate during one latency step (its
        bandwidth-delay product): how an op that waits on a chain of link steps states that
        wait as link work (ops/custom_allreduce.py: load passes)."""
        return self.bandwidth_bytes_per_s * self.latency_s


@dataclass(frozen=True, eq=False)  # identity equality: hashable, usable as a cache key
class Hardware:
    """One GPU. SI units; per-SM rates are per SM per clock unless the name says per second."""

    name: str
    architecture: str
    compute_capability: str
    aliases: tuple[str, ...]
    device_names: tuple[str, ...]
    sm_count: int
    boost_clock_hz: float
    tensor_clock_hz: float
    tensor_sustained_fraction: float
    tensor_power_exponent: float
    pipes_per_sm_per_clk: Mapping[str, float]
    issue_per_sm_per_clk: int
    tensor_flop_per_sm_per_clk: Mapping[str, float]
    registers_per_sm: int
    max_registers_per_thread: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    max_threads_per_cta: int
    smem_per_sm_bytes: int
    smem_per_cta_bytes: int
    smem_bytes_per_clk: float
    tmem_per_sm_bytes: int
    l2_capacity_bytes: float
    l2_bandwidth_bytes_per_s: float
    hbm_capacity_bytes: float
    hbm_peak_bandwidth_bytes_per_s: float
    hbm_achievable_fraction: float
    hbm_latency_s: float
    links: Mapping[str, Link]
    kernel_launch_s: float
    graph_kernel_gap_s: float
    tdp_w: float
    nvlink_domain_gpus: int = 1  # GPUs in one NVLink domain (beyond it: links["network"])
    nvls: bool = False  # the domain's NVSwitches reduce (NVLink SHARP): topology.nvls
    host_gpus: int | None = None  # GPUs under one host OS (topology.host_gpus; None: the domain)
    host_cpu: str = "x86"  # the host's CPU family (topology.host_cpu; absent: x86)
    mma_instruction: str = "mma_sync"
    packed_fp32: bool = False
    block_scaled_mma: tuple[str, ...] = ()
    stochastic_rounding: bool = False
    fp8_convert_pipe: str | None = None
    mma_sync_flop_per_sm_per_clk: Mapping[str, float] = field(default_factory=dict)
    # A locked SM clock (`nvidia-smi -lgc`, SOL-ExecBench's 1500 MHz on B200), or None for the
    # GPU's own boost behaviour (see "clock domains" below)
    sm_clock_hz: float | None = None
    # the power exponent of the block-scaled 4-bit MMAs (NVFP4, MXFP4) where it is their own
    # (engine.tensor_power_ratio); None: tensor_power_exponent
    tensor_power_exponent_fp4: float | None = None
    path: str = ""
    quantities: Mapping[str, Quantity] = field(default_factory=dict, repr=False, compare=False)
    capabilities: Mapping[str, Capability] = field(default_factory=dict, repr=False,
                                                   compare=False)
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False,
                                                     compare=False)

    # ---- clock domains --------------------------------------------------------------------
    # One SM clock drives every SM-clocked rate of a kernel: the tensor pipe, shared memory / L1,
    # the FMA, ALU, XU, FP64 and LSU pipes, the issue slots, and the L2 slices and crossbar
    # (NVIDIA quotes L2 bandwidth per clock, 5120 B/clk on A100 in its A100 whitepaper; nvidia-smi
    # and NVML expose no L2 clock beside graphics/SM, memory and video). The spec's
    # l2.bandwidth_bytes_per_s is read at the sustained SM clock, the loaded state its estimates
    # describe (l2_bandwidth_at). HBM and links have clocks of their own. A kernel without tensor work runs at max boost; under dense MMA load the power limit
    # pulls the whole SM clock down to the sustained clock, tensor_clock_hz ×
    # tensor_sustained_fraction (the engine interpolates by tensor-pipe utilization). A locked
    # clock caps both: below the sustained clock it replaces it.
    @property
    def max_sm_clock_hz(self) -> float:
        """The SM clock of a kernel with no tensor work: max boost, or the locked clock."""
        return self.sm_clock_hz if self.sm_clock_hz is not None else self.boost_clock_hz

    @property
    def sustained_sm_clock_hz(self) -> float:
        """The SM clock under sustained dense MMA load (power limit), capped by a locked clock."""
        return min(self.tensor_clock_hz * self.tensor_sustained_fraction, self.max_sm_clock_hz)

    @property
    def tensor_peak_clock_hz(self) -> float:
        """The clock of the datasheet tensor peaks (the tensor clock), capped by a locked clock."""
        return min(self.tensor_clock_hz, self.max_sm_clock_hz)

    def locked(self, sm_clock_hz: float | None) -> "Hardware":
        """This GPU with its SM clock locked at `sm_clock_hz` (None: as it is). The same spec and
        clock give the same object (a stable cache key)."""
        if sm_clock_hz is None or sm_clock_hz == self.sm_clock_hz:
            return self
        return _locked(self, sm_clock_hz)

    def without_tma(self) -> "Hardware":
        """This GPU as a kernel that cannot use the Tensor Memory Accelerator sees it: its
        legacy Ampere-style tensor path (mma.sync fed by cp.async, isa.mma_sync_flop_per_sm_per_clk,
        no block-scaled MMA), the rest unchanged; itself where that is already its tensor path.
        A GEMM whose rows are not 16-byte aligned runs so (ops/gemm.py Gemm.kernel_hardware).
        The same spec gives the same object (a stable cache key)."""
        if self.mma_instruction == "mma_sync":
            return self
        return _without_tma(self)

    # ---- derived rates -------------------------------------------------------------------
    def supports(self, dtype: str) -> bool:
        return tensor_dtype(dtype) in self.tensor_flop_per_sm_per_clk

    def tensor_peak_flop_per_s(self, dtype: str) -> float:
        """Datasheet dense peak: per-SM rate × SMs × tensor clock."""
        d = tensor_dtype(dtype)
        if d not in self.tensor_flop_per_sm_per_clk:
            raise InputError(f"{self.name}: the tensor cores do not support dtype '{dtype}' "
                             f"(supported: {', '.join(sorted(self.tensor_flop_per_sm_per_clk))})")
        return self.tensor_flop_per_sm_per_clk[d] * self.sm_count * self.tensor_peak_clock_hz

    @property
    def hbm_bandwidth_bytes_per_s(self) -> float:
        """Achievable streaming bandwidth (peak × achievable fraction)."""
        return self.hbm_peak_bandwidth_bytes_per_s * self.hbm_achievable_fraction

    @property
    def smem_bandwidth_bytes_per_s(self) -> float:
        """Aggregate shared-memory bandwidth: SMs × bytes/clk × max SM clock (boost or locked)."""
        return self.sm_count * self.smem_bytes_per_clk * self.max_sm_clock_hz

    def pipe_peak_per_s(self, pipe: str) -> float:
        """Device-wide thread-ops per second of a CUDA-core pipe at max boost (or the locked
        clock)."""
        return self.pipes_per_sm_per_clk[pipe] * self.sm_count * self.max_sm_clock_hz

    @property
    def l2_reference_clock_hz(self) -> float:
        """The SM clock the spec's L2 bandwidth is read at: the unlocked sustained SM clock."""
        return self.tensor_clock_hz * self.tensor_sustained_fraction

    def l2_bandwidth_at(self, sm_clock_hz: float) -> float:
        """L2 bandwidth at an SM clock: the spec's value scaled from l2_reference_clock_hz."""
        return self.l2_bandwidth_bytes_per_s * sm_clock_hz / self.l2_reference_clock_hz

    def ridge_point_flop_per_byte(self, dtype: str) -> float:
        """Arithmetic intensity where tensor peak meets HBM peak (datasheet roofline)."""
        return self.tensor_peak_flop_per_s(dtype) / self.hbm_peak_bandwidth_bytes_per_s

    @property
    def gpus_per_host(self) -> int:
        """GPUs under one host OS: topology.host_gpus, else the whole NVLink domain."""
        return self.host_gpus if self.host_gpus is not None else self.nvlink_domain_gpus

    def link(self, name: str) -> Link:
        if name not in self.links:
            raise InputError(f"{self.name}: no link '{name}' (has: {', '.join(self.links)})")
        return self.links[name]

    def summary(self) -> dict[str, Any]:
        """Resolved spec plus derived peaks, as plain data (for `perfmodel hw show`)."""
        peaks = {d: self.tensor_peak_flop_per_s(d) for d in self.tensor_flop_per_sm_per_clk}
        return {
            "name": self.name,
            "path": self.path,
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "aliases": list(self.aliases),
            "device_names": list(self.device_names),
            "quantities": {k: q.value for k, q in self.quantities.items()},
            "topology": {"nvlink_domain_gpus": self.nvlink_domain_gpus},
            "isa": {k.split(".", 1)[1]: (list(c.value) if isinstance(c.value, tuple) else c.value)
                    for k, c in self.capabilities.items() if k.startswith("isa.")},
            "derived": {
                "tensor_peak_flop_per_s": peaks,
                "ridge_point_flop_per_byte": {d: p / self.hbm_peak_bandwidth_bytes_per_s
                                              for d, p in peaks.items()},
                "fp32_peak_flop_per_s": 2 * self.pipe_peak_per_s("fma"),
                "hbm_achievable_bandwidth_bytes_per_s": self.hbm_bandwidth_bytes_per_s,
                "smem_aggregate_bandwidth_bytes_per_s": self.smem_bandwidth_bytes_per_s,
                "xu_peak_per_s": self.pipe_peak_per_s("xu"),
                "max_sm_clock_hz": self.max_sm_clock_hz,
                "sustained_sm_clock_hz": self.sustained_sm_clock_hz,
            },
            "sm_clock_hz": self.sm_clock_hz,
            "assumed": [k for k, q in self.quantities.items() if "assumed" in q.provenance],
        }


# ---- loading -----------------------------------------------------------------------------
def _is_number(x: Any) -> bool:
    """A finite int or float (an integer literal of any size compares exactly, never converted
    to float: 1 followed by 400 zeros is a number, out of every range)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return math.isfinite(x) if isinstance(x, float) else True


def _fitted_value(raw: dict, at: str, problems: list[str]) -> float | None:
    """A `fitted: KEY` quantity's value: perfmodel/fitted.yaml's KEY (no `value` beside it)."""
    key = raw["fitted"]
    if "value" in raw:
        problems.append(f"{at}.value: not allowed with `fitted: {key}` (the value lives in "
                        f"{fitted.PATH})")
    elif not isinstance(key, str) or key not in fitted.CONSTANTS:
        problems.append(f"{at}.fitted: {key!r} is not a constant of {fitted.PATH} (has: "
                        f"{', '.join(fitted.CONSTANTS)})")
    else:
        return fitted.CONSTANTS[key].value
    return None


def _check_quantity(raw: Any, q: Q, path: str, file: str, sources: Mapping[str, Any],
                    problems: list[str]) -> Quantity | None:
    at = where(file, path)
    if not _is_entry(raw, at, {"value", "range", "note", *PROVENANCE_KINDS}, problems):
        return None
    value = _fitted_value(raw, at, problems) if "fitted" in raw else raw.get("value")
    if value is None and "fitted" in raw:
        return None
    if not _is_number(value):
        problems.append(f"{at}.value: expected a number, got {show(value)}")
        return None
    if q.integer and isinstance(value, float) and not value.is_integer():
        problems.append(f"{at}.value: expected an integer, got {value!r}")
    if not q.lo <= value <= q.hi:
        problems.append(f"{at}.value: {show(value)} out of range [{q.lo:g}, {q.hi:g}]")
        value = None  # reported; the rest of the entry is still checked
    prov = _check_provenance(raw, at, sources, problems)
    rng = raw.get("range")
    if rng is not None and value is not None:
        if not (isinstance(rng, list) and len(rng) == 2 and all(_is_number(x) for x in rng)
                and rng[0] <= value <= rng[1]):
            problems.append(f"{at}.range: expected [lo, hi] numbers with lo <= value <= hi, "
                            f"got {show(rng)}")
            rng = None
    if value is None:
        return None
    note = raw.get("note", "")
    return Quantity(float(value), prov, tuple(rng) if rng else None, str(note))


def _is_entry(raw: Any, at: str, allowed: set[str], problems: list[str]) -> bool:
    """A spec entry is a mapping of known keys; reports what is not."""
    if not isinstance(raw, dict):
        problems.append(f"{at}: expected a mapping {{value: ..., source|derivation|measured|"
                        f"assumed: ...}}, got {type(raw).__name__}")
        return False
    for k in raw:
        if k not in allowed:
            problems.append(f"{at}.{k}: unknown key (expected one of {sorted(allowed)})")
    return True


def _check_provenance(raw: dict, at: str, sources: Mapping[str, Any],
                      problems: list[str]) -> dict[str, str]:
    prov = {k: raw[k] for k in PROVENANCE_KINDS if k in raw}
    if not prov:
        problems.append(f"{at}: no provenance (expected one of {', '.join(PROVENANCE_KINDS)})")
    for k, v in prov.items():
        if not isinstance(v, str) or not v.strip():
            problems.append(f"{at}.{k}: expected a non-empty string")
    if "source" in prov and isinstance(prov["source"], str) and prov["source"] not in sources:
        problems.append(f"{at}.source: '{prov['source']}' is not defined under `sources:`")
    return {k: str(v) for k, v in prov.items()}


def _check_capability(raw: Any, f: F, path: str, file: str, sources: Mapping[str, Any],
                      problems: list[str]) -> Capability | None:
    at = where(file, path)
    if not _is_entry(raw, at, {"value", "note", *PROVENANCE_KINDS} - {"fitted"}, problems):
        return None
    value = raw.get("value")
    if f.kind == "flag":
        if not isinstance(value, bool):
            problems.append(f"{at}.value: expected true or false, got {value!r}")
            return None
    elif f.kind == "choice":
        if value not in f.choices:
            problems.append(f"{at}.value: expected one of {', '.join(f.choices)}, got {value!r}")
            return None
    else:
        if not (isinstance(value, list) and all(v in f.choices for v in value)):
            problems.append(f"{at}.value: expected a list of {', '.join(f.choices)}, "
                            f"got {value!r}")
            return None
        value = tuple(value)
    prov = _check_provenance(raw, at, sources, problems)
    return Capability(value, prov, str(raw.get("note", "")))


def _walk(raw: Any, schema: Mapping[str, Any], path: str, file: str, sources: Mapping[str, Any],
          out: dict[str, Quantity | Capability], problems: list[str]) -> None:
    if not isinstance(raw, dict):
        problems.append(f"{where(file, path)}: expected a mapping, got {type(raw).__name__}")
        return
    for k in raw:
        if k not in schema:
            problems.append(f"{where(file, f'{path}.{k}' if path else k)}: unknown key "
                            f"(expected one of {sorted(schema)})")
    for k, sub in schema.items():
        p = f"{path}.{k}" if path else k
        if k not in raw:
            if not (isinstance(sub, (Q, F)) and sub.optional):
                problems.append(f"{where(file, p)}: missing required key")
            continue
        if isinstance(sub, F):
            cap = _check_capability(raw[k], sub, p, file, sources, problems)
            if cap is not None:
                out[p] = cap
        elif isinstance(sub, Q):
            got = _check_quantity(raw[k], sub, p, file, sources, problems)
            if got is not None:
                out[p] = got
        elif sub == "links":
            if not isinstance(raw[k], dict) or not raw[k]:
                problems.append(f"{where(file, p)}: expected a mapping of link name -> "
                                f"{{bandwidth_bytes_per_s, latency_s}}")
                continue
            for name, link in raw[k].items():
                if name == "auto":  # the collectives' `link: auto` picks among the links
                    problems.append(f"{where(file, f'{p}.auto')}: 'auto' is not a link name "
                                    f"(the collectives' link: auto chooses nvlink or network)")
                    continue
                _walk(link, LINK_SCHEMA, f"{p}.{name}", file, sources, out, problems)
        else:
            _walk(raw[k], sub, p, file, sources, out, problems)


def _check_header(raw: dict, file: str, problems: list[str]) -> None:
    v = raw.get("schema_version")
    if v != SCHEMA_VERSION:
        problems.append(f"{where(file, 'schema_version')}: expected {SCHEMA_VERSION}, got {v!r}")
    for key in ("name", "compute_capability"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            problems.append(f"{where(file, key)}: expected a non-empty string")
    if raw.get("architecture") not in ARCHITECTURES:
        problems.append(f"{where(file, 'architecture')}: expected one of {ARCHITECTURES}, "
                        f"got {raw.get('architecture')!r}")
    for key in ("aliases", "device_names"):
        val = raw.get(key, [])
        if not (isinstance(val, list) and all(isinstance(s, str) for s in val)):
            problems.append(f"{where(file, key)}: expected a list of strings")
    src = raw.get("sources")
    if not isinstance(src, dict) or not src:
        problems.append(f"{where(file, 'sources')}: expected a mapping of id -> {{title, url}}")
    else:
        for sid, entry in src.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("title"), str)
                    and isinstance(entry.get("url"), str)):
                problems.append(f"{where(file, f'sources.{sid}')}: expected {{title, url}}")


# Quantities that bound one another: (key, at most this key, why)
CONSISTENCY = (
    ("sm_resources.smem_per_cta_bytes", "sm_resources.smem_per_sm_bytes",
     "a CTA's shared memory lives in one SM"),
    ("sm_resources.max_registers_per_thread", "sm_resources.registers_per_sm",
     "a thread's registers live in one SM's register file"),
    ("graph_kernel_gap_s", "kernel_launch_s",
     "a CUDA graph removes the host's share of a launch, never adds to it"),
)


def _check_consistency(found: Mapping[str, Any], file: str, problems: list[str]) -> None:
    """Quantities valid alone but not together (CONSISTENCY), and threads per CTA within the
    warps an SM holds."""
    def value(key: str) -> float | None:
        q = found.get(key)
        return q.value if isinstance(q, Quantity) else None
    for key, limit, why in CONSISTENCY:
        a, b = value(key), value(limit)
        if a is not None and b is not None and a > b:
            problems.append(f"{where(file, key)}.value: {a:g} exceeds {limit} ({b:g}): {why}")
    boost, tensor = value("clocks.boost_clock_hz"), value("clocks.tensor_clock_hz")
    fraction = value("clocks.tensor_sustained_fraction")
    if None not in (boost, tensor, fraction) and tensor * fraction < boost / 2:
        # the pipes level moves a kernel's SM clock between boost and the sustained clock by
        # its tensor utilization; with the sustained clock below half of boost, a kernel with
        # some tensor work would run it faster than the datasheet peak (the roofline)
        problems.append(f"{where(file, 'clocks.tensor_clock_hz')}.value: the sustained clock "
                        f"tensor_clock_hz x tensor_sustained_fraction = "
                        f"{tensor * fraction / 1e6:.0f} MHz is below half of boost_clock_hz "
                        f"({boost / 1e6:.0f} MHz); real GPUs sustain 0.6-0.95 of boost")
    threads = value("sm_resources.max_threads_per_cta")
    warps = value("sm_resources.max_warps_per_sm")
    if threads is not None and warps is not None and threads > 32 * warps:
        problems.append(f"{where(file, 'sm_resources.max_threads_per_cta')}.value: {threads:g} "
                        f"threads exceed max_warps_per_sm ({warps:g}) x 32: a CTA runs on one "
                        f"SM")


def parse_spec(raw: Any, file: str = "") -> Hardware:
    """Validate a parsed spec mapping and build a Hardware; raises InputError with all problems."""
    if not isinstance(raw, dict):
        raise InputError(f"{where(file, '')}: expected a mapping at the top level, "
                         f"got {type(raw).__name__}")
    problems: list[str] = []
    _check_header(raw, file, problems)
    sources = raw.get("sources") if isinstance(raw.get("sources"), dict) else {}
    body = {k: v for k, v in raw.items() if k not in HEADER_KEYS}
    found: dict[str, Quantity | Capability] = {}
    _walk(body, SCHEMA, "", file, sources, found, problems)
    if not problems:
        _check_consistency(found, file, problems)
    if problems:
        raise InputError(problems)
    qs = {k: q for k, q in found.items() if isinstance(q, Quantity)}
    caps = {k: c for k, c in found.items() if isinstance(c, Capability)}

    def v(path: str, default: float = 0.0) -> float:
        return qs[path].value if path in qs else default

    link_names = {p.split(".")[1] for p in qs if p.startswith("links.")}
    return Hardware(
        name=raw["name"],
        architecture=raw["architecture"],
        compute_capability=raw["compute_capability"],
        aliases=tuple(raw.get("aliases", [])),
        device_names=tuple(raw.get("device_names", [])),
        sm_count=int(v("sm_count")),
        boost_clock_hz=v("clocks.boost_clock_hz"),
        tensor_clock_hz=v("clocks.tensor_clock_hz"),
        tensor_sustained_fraction=v("clocks.tensor_sustained_fraction"),
        tensor_power_exponent=v("clocks.tensor_power_exponent"),
        pipes_per_sm_per_clk={p: v(f"pipes_per_sm_per_clk.{p}") for p in PIPES},
        issue_per_sm_per_clk=int(v("issue_per_sm_per_clk")),
        tensor_flop_per_sm_per_clk={d: v(f"tensor_flop_per_sm_per_clk.{d}") for d in TENSOR_DTYPES
                                    if f"tensor_flop_per_sm_per_clk.{d}" in qs},
        registers_per_sm=int(v("sm_resources.registers_per_sm")),
        max_registers_per_thread=int(v("sm_resources.max_registers_per_thread")),
        max_warps_per_sm=int(v("sm_resources.max_warps_per_sm")),
        max_ctas_per_sm=int(v("sm_resources.max_ctas_per_sm")),
        max_threads_per_cta=int(v("sm_resources.max_threads_per_cta")),
        smem_per_sm_bytes=int(v("sm_resources.smem_per_sm_bytes")),
        smem_per_cta_bytes=int(v("sm_resources.smem_per_cta_bytes")),
        smem_bytes_per_clk=v("sm_resources.smem_bytes_per_clk"),
        tmem_per_sm_bytes=int(v("sm_resources.tmem_per_sm_bytes")),
        l2_capacity_bytes=v("l2.capacity_bytes"),
        l2_bandwidth_bytes_per_s=v("l2.bandwidth_bytes_per_s"),
        hbm_capacity_bytes=v("hbm.capacity_bytes"),
        hbm_peak_bandwidth_bytes_per_s=v("hbm.peak_bandwidth_bytes_per_s"),
        hbm_achievable_fraction=v("hbm.achievable_fraction"),
        hbm_latency_s=v("hbm.latency_s"),
        links={n: Link(v(f"links.{n}.bandwidth_bytes_per_s"), v(f"links.{n}.latency_s"),
                       v(f"links.{n}.achievable_fraction", 1.0),
                       *(qs[f"links.{n}.{p}_latency_s"].value if f"links.{n}.{p}_latency_s" in qs
                         else None for p in ("ll", "ll128", "simple")),
                       qs[f"links.{n}.nccl_base_latency_s"].value
                       if f"links.{n}.nccl_base_latency_s" in qs else None)
               for n in sorted(link_names)},
        kernel_launch_s=v("kernel_launch_s"),
        graph_kernel_gap_s=v("graph_kernel_gap_s"),
        tdp_w=v("power.tdp_w"),
        nvlink_domain_gpus=int(v("topology.nvlink_domain_gpus")),
        nvls=caps["topology.nvls"].value if "topology.nvls" in caps else False,
        host_gpus=int(qs["topology.host_gpus"].value) if "topology.host_gpus" in qs else None,
        host_cpu=caps["topology.host_cpu"].value if "topology.host_cpu" in caps else "x86",
        mma_instruction=caps["isa.mma_instruction"].value,
        packed_fp32=caps["isa.packed_fp32"].value,
        block_scaled_mma=caps["isa.block_scaled_mma"].value,
        stochastic_rounding=caps["isa.stochastic_rounding"].value,
        fp8_convert_pipe=(caps["isa.fp8_convert_pipe"].value
                          if "isa.fp8_convert_pipe" in caps else None),
        mma_sync_flop_per_sm_per_clk={
            d: v(f"isa.mma_sync_flop_per_sm_per_clk.{d}") for d in MMA_SYNC_DTYPES
            if f"isa.mma_sync_flop_per_sm_per_clk.{d}" in qs},
        tensor_power_exponent_fp4=(v("clocks.tensor_power_exponent_fp4")
                                   if "clocks.tensor_power_exponent_fp4" in qs else None),
        path=file,
        quantities=qs,
        capabilities=caps,
        sources=sources,
    )


def load_spec(path: str | Path) -> Hardware:
    """Load and validate one spec file."""
    return parse_spec(yamlio.load(path, "hardware spec"), str(path))


# ---- the built-in catalogue ----------------------------------------------------------------
def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


@functools.lru_cache(maxsize=None)
def _builtin_spec(path: Path) -> Hardware:
    """One built-in spec file, loaded once: the catalogue and name lookups share the object."""
    return load_spec(path)


@functools.lru_cache(maxsize=1)
def _builtin_files() -> dict[str, Path]:
    """The built-in spec files by the key of their file name (a spec's canonical name)."""
    return {_key(f.stem): f for f in sorted(builtin_spec_dir().glob("*.yaml"))}


@functools.lru_cache(maxsize=1)
def builtin_catalogue() -> dict[str, Hardware]:
    """All built-in specs keyed by canonical name (loads each file once)."""
    specs = {}
    for f in _builtin_files().values():
        hw = _builtin_spec(f)
        specs[hw.name] = hw
    return specs


@functools.lru_cache(maxsize=1)
def _name_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for hw in builtin_catalogue().values():
        for n in (hw.name, *hw.aliases, *hw.device_names):
            k = _key(n)
            if k in index and index[k] != hw.name:
                raise InputError(f"{hw.path}: name/alias '{n}' also belongs to {index[k]}")
            index[k] = hw.name
    return index


@functools.lru_cache(maxsize=1)
def _header_index() -> dict[str, Path]:
    """Name key -> the one built-in file whose header lines name it (keys two files claim are
    left out: the full catalogue then decides, and reports the clash)."""
    index: dict[str, Path] = {}
    clashes = set()
    for f in _builtin_files().values():
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # the full load reports the file
        for n in header_names(text):
            k = _key(n)
            if k in index and index[k] != f:
                clashes.add(k)
            index[k] = f
    for k in clashes:
        index.pop(k, None)
    return index


def hardware(name_or_path: "str | Path | Hardware", sm_clock_hz: float | None = None
             ) -> Hardware:
    """Resolve a built-in name, alias or driver device name, or load a spec file by path;
    `sm_clock_hz` locks the SM clock (Hz, at most the GPU's max boost), as `nvidia-smi -lgc`
    does: every SM-clocked rate follows it (Hardware "clock domains")."""
    if isinstance(name_or_path, Hardware):
        return name_or_path.locked(sm_clock_hz)
    s = str(name_or_path)
    if s.endswith((".yaml", ".yml")) or yamlio.is_file(s):
        return load_spec(s).locked(sm_clock_hz)
    key = _key(s)
    # a canonical name or an alias: its file alone, not every spec (start-up time); the parsed
    # spec must confirm the name, else the whole catalogue decides
    for file in (_builtin_files().get(key), _header_index().get(key)):
        if file is not None:
            hw = _builtin_spec(file)
            if key in {_key(n) for n in (hw.name, *hw.aliases, *hw.device_names)}:
                return hw.locked(sm_clock_hz)
    hit = _name_index().get(key)
    if hit is None:
        known = ", ".join(sorted(builtin_catalogue()))
        raise InputError(f"unknown hardware '{s}' (built-in: {known}; or give a spec path)")
    return builtin_catalogue()[hit].locked(sm_clock_hz)


# The lowest SM clock a lock may set (the schema's floor for clocks)
MIN_SM_CLOCK_HZ = SCHEMA["clocks"]["boost_clock_hz"].lo


@functools.lru_cache(maxsize=256)
def _locked(hw: Hardware, sm_clock_hz: float) -> Hardware:
    if not (isinstance(sm_clock_hz, (int, float)) and not isinstance(sm_clock_hz, bool)
            and math.isfinite(sm_clock_hz)):
        raise InputError(f"{hw.name}: SM clock lock {sm_clock_hz!r} is not a number of Hz")
    if sm_clock_hz > hw.boost_clock_hz:
        raise InputError(f"{hw.name}: SM clock lock {sm_clock_hz / 1e6:.0f} MHz is above its max "
                         f"boost clock ({hw.boost_clock_hz / 1e6:.0f} MHz)")
    if sm_clock_hz < MIN_SM_CLOCK_HZ:
        raise InputError(f"{hw.name}: SM clock lock {sm_clock_hz / 1e6:.4g} MHz is below "
                         f"{MIN_SM_CLOCK_HZ / 1e6:.0f} MHz")
    return dataclasses.replace(hw, sm_clock_hz=float(sm_clock_hz))


@functools.lru_cache(maxsize=64)
def _without_tma(hw: Hardware) -> Hardware:
    return dataclasses.replace(hw, mma_instruction="mma_sync", block_scaled_mma=(),
                               tensor_flop_per_sm_per_clk=dict(hw.mma_sync_flop_per_sm_per_clk))


FREQUENCY = re.compile(r"^\s*((?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*(ghz|mhz|khz|hz)\s*$", re.I)
FREQUENCY_UNIT_HZ = {"ghz": 1e9, "mhz": 1e6, "khz": 1e3, "hz": 1.0}


def parse_clock_hz(text: str, what: str = "--sm-clock") -> float:
    """`1500MHz`, `1.5GHz`, `1.5e9Hz` in Hz; an InputError naming `what` otherwise."""
    m = FREQUENCY.match(str(text))
    if not m:
        raise InputError(f"{what}: expected a clock with its unit, such as 1500MHz or 1.5GHz, "
                         f"got {text!r}")
    hz = float(m.group(1)) * FREQUENCY_UNIT_HZ[m.group(2).lower()]
    if hz <= 0:
        raise InputError(f"{what}: expected a positive clock, got {text!r}")
    return hz


def list_hardware() -> list[Hardware]:
    return list(builtin_catalogue().values())
