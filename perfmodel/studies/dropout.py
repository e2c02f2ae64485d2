"""Dropout RNG schedules for one transformer block (Ma, Liu, Krashinsky, "Reducing the Cost of
Dropout in Flash-Attention by Hiding RNG with GEMM", arXiv:2410.07531).

The block is a training forward (optionally with its backward) of one Llama-style layer: norm,
QKV projection, RoPE, attention with dropout on the attention probabilities, output projection,
residual, norm, gated FFN, residual. Three schedules of the same dropout:

  sequential  a Philox kernel writes the mask to HBM, then attention reads it;
  fused       attention generates its randoms in-kernel (FlashAttention's Philox4x32-7), on the
              same FMA-heavy / ALU / issue slots as its softmax; a backward regenerates them;
  overlap     the Philox kernel runs concurrently with the GEMMs before attention (the previous
              layer's FFN and this layer's QKV), writes the mask, attention reads it;
  rng_in_gemm the same GEMMs generate the mask themselves: Philox runs in the producer warpgroup
              of the warp-specialized GEMM (CUTLASS's TMA warpgroup, of whose 4 warps one issues
              TMA and 3 idle), so it shares the GEMM's SMs, issue slots, FMA-heavy and ALU pipes
              and register file, and writes the mask beside the GEMM's output
              (`rng_in_gemm_demand`); attention reads the mask as in `overlap`.

How concurrent kernels share the GPU decides `overlap`. It is evaluated three ways and the
best feasible one is the schedule's time:
  * streams: two CUDA streams, co-residency limited by registers / shared memory / warps (the
    contention model of `perfmodel.contention`, stepped by the scheduler). A GEMM that fills
    every SM leaves no room.
  * partition: SMs split between the GEMMs and the RNG kernel (green contexts or a smaller
    GEMM grid), the best split searched.
  * ideal co-location is also reported, as an upper bound: the two kernels share SMs as if the RNG
    warps lived inside the GEMM kernel, limited only by pipes, issue slots and memory. This is the
    form of the paper's model (RNG and GEMM "have distinct resource requirements").
The steady-state block time is the makespan of two consecutive blocks minus that of one, so the
RNG of a block overlaps the previous block's FFN as it would in a deep model.

`judged_overheads` sets the fused-dropout cost against published rows (FA4 on GB200, FA2-class on
GB10), with the share of it the SM clock takes (`held_clock_overhead`: the engine raises the clock
of a kernel whose MMAs dropout idles); `fold_check` sets the model against FA4's own measurement
of its Philox XOR fold; `paper_implied` and `paper_conditions` state the paper's headline (1.26x over sequential,
1.22x over fused) beside the model's under each condition it depends on (docs/studies.md §1.7).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from perfmodel.contention import load_of, saturated_resource
from perfmodel.demand import Demand, add_work
from perfmodel.ops.rng import BITS_PER_CALL, chains_in_flight, philox_call_instructions, \
    philox_chain_cycles, GENERATOR_ROUNDS
from perfmodel.workloads.builder import Workload, layer_nodes
from perfmodel.engine import estimate, resolve
from perfmodel.graph import Node, OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.workloads.models import ModelSpec, load_model
from perfmodel.ops import Op, op as make_op
from perfmodel.ops.attention.tiles import visited
from perfmodel.schedule import schedule

SCHEDULES = ("sequential", "fused", "overlap", "rng_in_gemm")
# The producer warpgroup of a warp-specialized Hopper/Blackwell GEMM: 4 warps at 40 registers
# (CUTLASS sm90 kernels, setmaxnreg 40 producer / 232 consumers), one of which issues TMA; the
# other 3 run Philox. Live registers of such a warp beside Philox: addresses, loop and pipeline
# state (assumed 16).
PRODUCER_RNG_WARPS = 3
PRODUCER_REGISTERS = 40
PRODUCER_LIVE_REGISTERS = 16
RNG_STREAM = "rng"


@dataclass(frozen=True)
class DropoutConfig:
    p: float = 0.1
    generator: str = "philox4x32-7"
    mask: str = "bytes"            # precomputed mask layout (sequential, overlap)
    bits_per_element: int = 8      # random bits per decision: 8 → 16 per Philox call (FA2),
    #                                16 → 8 per call (FA4 CuTe), 128 → one call per element
    lop3_fold: bool = True
    precomputed_keys: bool = False
    backward: bool = False         # include the block's backward pass


@dataclass
class ScheduleResult:
    schedule: str
    time_s: float
    mode: str = ""                  # overlap: streams | partition
    rng_time_s: float = 0.0         # the RNG kernel alone (0 when fused)
    hidden_fraction: float = 0.0    # share of the RNG kernel's time hidden under GEMMs
    saturated: str = ""             # what binds while RNG and GEMMs run together
    resource_time_s: dict[str, float] = field(default_factory=dict)
    variants: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _block_nodes(model: ModelSpec, batch: int, seq: int, tp: int, dtype: str, backward: bool,
                 prefix: str) -> list[Node]:
    return layer_nodes(model, Workload("train", batch, seq, tp=tp, dtype=dtype), prefix,
                       layer=0, backward=backward)


def _with_dropout(node: Node, cfg: DropoutConfig, rng_mode: str) -> Node:
    o = node.op
    if o.name != "attention":
        return node
    return node._replace(op=o.with_params(dropout_p=cfg.p, dropout_rng=rng_mode,
                                          dropout_mask=cfg.mask,
                                          dropout_generator=cfg.generator,
                                          dropout_bits_per_score=cfg.bits_per_element))


def rng_op(attention: Op, cfg: DropoutConfig) -> Op:
    """The Philox kernel producing one attention's dropout mask: one decision per computed
    score, `bits_per_element` random bits each (8: FA2's 16 decisions per Philox call)."""
    a = attention
    scores = visited(a.seq_q, a.seq_kv or a.seq_q, a.causal, a.window, 128, 128)[1]
    return make_op("rng", elements=int(scores) * a.batch * a.heads,
                   bits_per_element=cfg.bits_per_element,
                   generator=cfg.generator, output="mask_bits" if cfg.mask == "bits" else "bytes",
                   lop3_fold=cfg.lop3_fold, precomputed_keys=cfg.precomputed_keys)


def block_graph(model: ModelSpec, schedule_name: str, cfg: DropoutConfig, batch: int, seq: int,
                tp: int = 1, dtype: str = "bf16", blocks: int = 1) -> OpGraph:
    """`blocks` consecutive blocks under one dropout schedule, as a graph with streams."""
    nodes: list[Node] = []
    for b in range(blocks):
        layer = _block_nodes(model, batch, seq, tp, dtype, cfg.backward, f"b{b}.")
        if b and layer:  # chain the blocks
            layer[0] = layer[0]._replace(after=(nodes[-1].name,))
        mode = "fused" if schedule_name == "fused" else "precomputed"
        layer = [_with_dropout(n, cfg, mode) for n in layer]
        attn = next(n for n in layer if n.op.name == "attention")
        if schedule_name == "sequential":
            i = layer.index(attn)
            rng = Node(f"b{b}.rng", rng_op(attn.op, cfg), (layer[i - 1].name,))
            layer.insert(i, rng)
            layer[i + 1] = attn._replace(after=(rng.name,))
        elif schedule_name == "overlap":
            # launched with the previous block's FFN (or at the start), on its own stream
            start = _window_start(nodes) if nodes else ()
            rng = Node(f"b{b}.rng", rng_op(attn.op, cfg), start, RNG_STREAM)
            i = layer.index(attn)
            layer[i] = attn._replace(after=(layer[i - 1].name, rng.name))
            layer.insert(0, rng)
            if layer[1].after == (rng.name,):
                layer[1] = layer[1]._replace(after=rng.after)
        nodes += layer
    if nodes and nodes[0].after:
        nodes[0] = nodes[0]._replace(after=())
    return OpGraph(f"{model.name}-block-{schedule_name}", nodes)


def _window_start(nodes: list[Node]) -> tuple[str, ...]:
    """The RNG of the next block may start once the previous block's FFN begins."""
    ffn = [n for n in nodes if n.name.endswith(".ffn_norm")]
    return (ffn[-1].name,) if ffn else ()


def _steady_block_time(model, name, cfg, batch, seq, tp, dtype, hw, slot_limits=True):
    one = schedule(block_graph(model, name, cfg, batch, seq, tp, dtype, 1), hw,
                   slot_limits=slot_limits)
    two = schedule(block_graph(model, name, cfg, batch, seq, tp, dtype, 2), hw,
                   slot_limits=slot_limits)
    return two.total_time_s - one.total_time_s, two


def _partition_window(window_ops: list[Op], rng: Op, hw: Hardware) -> tuple[float, int]:
    """Best split of the SMs: GEMMs on SMs − k, RNG on k, both at once; HBM stays shared."""
    best = (float("inf"), 0)
    for k in sorted({max(1, hw.sm_count * f // 64) for f in (1, 2, 4, 6, 8, 12, 16, 24, 32)}):
        rest = dataclasses.replace(hw, sm_count=hw.sm_count - k)
        mine = dataclasses.replace(hw, sm_count=k)
        gemms = [estimate(o.demand(rest), rest) for o in window_ops]
        r = estimate(rng.demand(mine), mine)
        hbm = (sum(g.hbm_bytes for g in gemms) + r.hbm_bytes) / hw.hbm_bandwidth_bytes_per_s
        t = max(sum(g.time_s for g in gemms), r.time_s, hbm)
        best = min(best, (t, k))
    return best


def rng_in_gemm_demand(gemm: Op, rng_elements: float, cfg: DropoutConfig, hw: Hardware
                       ) -> Demand:
    """The GEMM's own kernel with `rng_elements` dropout decisions generated by its producer
    warps: the GEMM's launch (no extra registers: the producer warpgroup's 40 are what Philox
    gets), its work plus the Philox work, issue slots summed, the mask's bytes written beside
    the output. The Philox chains' latency floor with PRODUCER_RNG_WARPS warps per SM of
    PRODUCER_REGISTERS registers sets a floor on the issue the RNG needs (rng.chains_in_flight).
    Details carry the terms (`rng_in_gemm`)."""
    g = resolve(gemm.demand(hw), hw)
    r = make_op("rng", elements=max(1, int(rng_elements)), bits_per_element=cfg.bits_per_element,
                generator=cfg.generator, output="mask_bits" if cfg.mask == "bits" else "bytes",
                lop3_fold=cfg.lop3_fold, precomputed_keys=cfg.precomputed_keys).demand(hw)
    rounds = GENERATOR_ROUNDS[cfg.generator]
    calls = rng_elements * cfg.bits_per_element / BITS_PER_CALL
    ctas_per_sm = 1  # persistent warp-specialized GEMMs keep one CTA per SM
    per_thread = calls / max(1, g.launch.ctas) / (PRODUCER_RNG_WARPS * 32)
    c = chains_in_flight(PRODUCER_REGISTERS, PRODUCER_LIVE_REGISTERS, per_thread)
    w = PRODUCER_RNG_WARPS * ctas_per_sm / 4.0
    floor = calls / 32.0 * philox_chain_cycles(rounds, cfg.lop3_fold) / (w * c)
    work = dict(add_work(g.work, r.work))
    work["issue"] = max(work.get("issue", 0.0), g.work.get("issue", 0.0) + floor)
    terms = {"rng_elements": rng_elements, "philox_calls": calls,
             "rng_issue": r.work.get("issue", 0.0), "chain_issue_floor": floor,
             "chains_in_flight": float(c), "mask_bytes": r.hbm_bytes,
             "philox_instructions_per_call": philox_call_instructions(
                 rounds, cfg.lop3_fold, cfg.precomputed_keys)}
    return dataclasses.replace(g, work=work, hbm_bytes=g.hbm_bytes + r.hbm_bytes,
                               details={**g.details, "rng_in_gemm": terms})


def _rng_in_gemm_window(window_ops: list[Op], rng: Op, cfg: DropoutConfig, hw: Hardware
                        ) -> tuple[float, list[dict]]:
    """The window's GEMMs each generating a share of the mask, in proportion to their own time
    (the mask is split by rows across the GEMMs that run before attention)."""
    alone = [estimate(o.demand(hw), hw).time_s for o in window_ops]
    total = sum(alone) or 1.0
    t, terms = 0.0, []
    for o, a in zip(window_ops, alone):
        e = estimate(rng_in_gemm_demand(o, rng.elements * a / total, cfg, hw), hw)
        t += e.time_s
        terms.append({"gemm_alone_s": a, "with_rng_s": e.time_s, "bound": e.bound,
                      **e.details["rng_in_gemm"]})
    return t, terms


def evaluate(model: ModelSpec | str, hw: Hardware | str, batch: int = 1, seq: int = 4096,
             dtype: str = "fp8", tp: int = 1, cfg: DropoutConfig = DropoutConfig()
             ) -> dict[str, ScheduleResult]:
    """Steady-state time of one block under each schedule (see module docstring)."""
    m = model if isinstance(model, ModelSpec) else load_model(model)
    h = hardware(hw)
    results: dict[str, ScheduleResult] = {}
    for name in ("sequential", "fused"):
        t, pred = _steady_block_time(m, name, cfg, batch, seq, tp, dtype, h)
        results[name] = ScheduleResult(name, t, resource_time_s=_resource_totals(pred, "b1."))
    seq_pred = _steady_block_time(m, "sequential", cfg, batch, seq, tp, dtype, h)[1]
    rng_time = next(o.estimate.time_s for o in seq_pred.ops if o.name == "b1.rng")
    rng = next(o.op for o in seq_pred.ops if o.name == "b1.rng")

    streams, pred = _steady_block_time(m, "overlap", cfg, batch, seq, tp, dtype, h)
    ideal, _ = _steady_block_time(m, "overlap", cfg, batch, seq, tp, dtype, h,
                                  slot_limits=False)
    # partition: the RNG's window (prev FFN GEMMs + QKV) on SMs − k; the rest as in sequential
    window = [o for o in seq_pred.ops if _in_window(o.name)]
    window_alone = sum(o.estimate.time_s for o in window)
    part_window, k = _partition_window([o.op for o in window], rng, h)
    partition = results["sequential"].time_s - window_alone - rng_time + part_window
    mode, t = min((("streams", streams), ("partition", partition)), key=lambda x: x[1])
    seq_t = results["sequential"].time_s
    hidden = max(0.0, min(1.0, (seq_t - t) / rng_time)) if rng_time else 0.0
    loads = [load_of(resolve(o.op.demand(h), h), o.estimate, h) for o in window] + [
        load_of(rng.demand(h), estimate(rng.demand(h), h), h)]
    results["overlap"] = ScheduleResult(
        "overlap", t, mode=mode, rng_time_s=rng_time, hidden_fraction=hidden,
        saturated=saturated_resource(loads, slot_limits=(mode == "streams")),
        resource_time_s=_resource_totals(pred, "b1."),
        variants={"streams_s": streams, "partition_s": partition, "partition_rng_sms": k,
                  "ideal_colocated_s": ideal})
    results["sequential"].rng_time_s = rng_time
    # rng_in_gemm: the window's GEMMs write the mask; the rest of the block as in sequential
    # without its RNG kernel
    in_gemm_window, terms = _rng_in_gemm_window([o.op for o in window], rng, cfg, h)
    t_in = results["sequential"].time_s - window_alone - rng_time + in_gemm_window
    results["rng_in_gemm"] = ScheduleResult(
        "rng_in_gemm", t_in, mode="producer warps", rng_time_s=rng_time,
        hidden_fraction=max(0.0, min(1.0, (seq_t - t_in) / rng_time)) if rng_time else 0.0,
        saturated=max(terms, key=lambda x: x["with_rng_s"])["bound"] if terms else "",
        variants={"window_alone_s": window_alone, "window_with_rng_s": in_gemm_window,
                  "gemms": terms})
    return results


def _in_window(name: str) -> bool:
    """The previous block's FFN GEMMs and this block's QKV projection."""
    block, role = name.split(".", 1)
    return (block == "b0" and role in ("gate_up", "down")) or (block == "b1" and role == "qkv")


def _resource_totals(pred, prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for o in pred.ops:
        if o.name.startswith(prefix):
            for r, t in o.estimate.resource_time_s.items():
                out[r] = out.get(r, 0.0) + t
    return out


def speedups(results: dict[str, ScheduleResult]) -> dict[str, float]:
    o = results["overlap"].time_s
    out = {"overlap_vs_sequential": results["sequential"].time_s / o,
           "overlap_vs_fused": results["fused"].time_s / o}
    if "rng_in_gemm" in results:
        g = results["rng_in_gemm"].time_s
        out.update(rng_in_gemm_vs_sequential=results["sequential"].time_s / g,
                   rng_in_gemm_vs_fused=results["fused"].time_s / g,
                   rng_in_gemm_vs_overlap=o / g)
    return out


def best_schedule(results: dict[str, ScheduleResult]) -> str:
    """The fastest schedule (ties to the earlier one in SCHEDULES)."""
    return min((n for n in SCHEDULES if n in results), key=lambda n: results[n].time_s)


# ------------------------------------------------------------------ judged fused-dropout rows --

JUDGED_ROWS = "dropout_overheads.csv"  # in validate/data (validate/data/dropout_SOURCES.md)


def _data_file(name: str):
    """validate/data/<name>, shipped in the wheel as perfmodel/validation/data/<name>
    (pyproject.toml package data), so the study runs after a plain install too."""
    from perfmodel.shipped import shipped_dir
    return shipped_dir("validation/data", "validate/data") / name


def judged_overheads(path=None) -> list[dict[str, Any]]:
    """The model's fused-dropout overhead (time with dropout / without − 1, %) against each
    published row of validate/data/dropout_overheads.csv (judged only; nothing is fitted on
    them). Error in percentage points: predicted − published; `outside_pp` is the distance to
    the published range where the row gives one (FA4's GB200 ranges), else |error|."""
    import csv
    p = path or _data_file(JUDGED_ROWS)
    out = []
    with open(p) as f:
        for row in csv.DictReader(f):
            shape = dict(batch=int(row["batch"]), heads=int(row["heads"]), seq_q=int(row["seq"]),
                         head_dim=int(row["head_dim"]), dtype="bf16",
                         causal=row["causal"] == "true", direction=row["direction"],
                         kernel=row["kernel_source"])
            hw = hardware(row["hardware"])
            base_op = make_op("attention", **shape)
            base = estimate(base_op.demand(hw), hw)
            drop_op = make_op("attention", dropout_p=float(row["dropout_p"]),
                              dropout_bits_per_score=int(row["bits_per_score"]), **shape)
            drop = estimate(drop_op.demand(hw), hw)
            pred = 100.0 * (drop.time_s / base.time_s - 1.0)
            clock = held_clock_overhead(base_op, drop_op, hw)
            pub, lo, hi = (float(row[k]) for k in ("published_overhead_pct", "published_lo_pct",
                                                   "published_hi_pct"))
            outside = max(0.0, lo - pred, pred - hi) if hi > lo else abs(pred - pub)
            out.append({"id": row["id"], "hardware": row["hardware"],
                        "direction": row["direction"], "batch": shape["batch"],
                        "seq": shape["seq_q"], "head_dim": shape["head_dim"],
                        "causal": shape["causal"], "published_pct": pub,
                        "published_range_pct": (lo, hi), "predicted_pct": pred,
                        "error_pp": pred - pub, "outside_pp": outside,
                        "held_clock_pct": clock["held_clock_pct"],
                        "held_clock_outside_pp": (
                            max(0.0, lo - clock["held_clock_pct"], clock["held_clock_pct"] - hi)
                            if hi > lo else abs(clock["held_clock_pct"] - pub)),
                        "terms": {**dropout_terms(drop_op, hw), **clock}})
    return out


def _main_kernel_clock_hz(e) -> float:
    """The SM clock the engine gives an attention Estimate's main kernel (the longest part of a
    backward's three kernels)."""
    parts = e.details.get("parts")
    if parts:
        return float(max(parts, key=lambda p: p["time_s"])["sm_clock_hz"])
    return float(e.details["sm_clock_hz"])


def held_clock_overhead(base: Op, drop: Op, hw: Hardware) -> dict[str, float]:
    """How much of a fused-dropout overhead is the SM clock's. The engine sets a kernel's clock
    from its tensor pipe's utilization (engine.kernel_clock_hz: max boost at none, the sustained
    clock at full), so a dropout that leaves the MMAs idler raises the clock of the whole SM and
    the Philox work runs faster too. `held_clock_pct`: the overhead with the SM clock locked at
    the no-dropout main kernel's (Hardware.locked; the dropout kernel may not run faster than
    the kernel without it, as it would if its integer pipes drew power like the MMAs do).
    `clock_ratio`: the dropout main kernel's clock over the no-dropout one's, as the engine
    gives them."""
    b = estimate(base.demand(hw), hw)
    d = estimate(drop.demand(hw), hw)
    c0 = _main_kernel_clock_hz(b)
    held = hw.locked(c0)
    hb = estimate(base.demand(held), held).time_s
    hd = estimate(drop.demand(held), held).time_s
    return {"base_sm_clock_hz": c0, "clock_ratio": _main_kernel_clock_hz(d) / c0,
            "held_clock_pct": 100.0 * (hd / hb - 1.0)}


# FA4's own measurement of its Philox XOR fold (flash_attn/cute/philox.py comment in the FA4
# CuTe dropout, PR 2597, as the project's research notes quote it; the dropout code is in no
# released flash-attn-4 wheel, 4.0.0b40 the latest): folding each three-input XOR into one
# LOP3 "saves ~15 us on the fwd kernel but REGRESSES the bwd kernel by ~390 us", at B = 4,
# S = 8K, Hq = 8, Hk = 1, D = 128, causal, on an SM100 GPU (taken as B200).
FA4_FOLD_SHAPE = dict(batch=4, heads=8, kv_heads=1, seq_q=8192, head_dim=128, dtype="bf16",
                      causal=True, dropout_p=0.125)
FA4_FOLD_PUBLISHED_SAVING_S = {"fwd": 15e-6, "bwd": -390e-6}


def fold_check(hw: Hardware | str = "B200") -> dict[str, dict[str, float]]:
    """The model against FA4's fold measurement: per pass, the time the fold saves (unfolded −
    folded, seconds; negative: folding is slower) in the model and as measured. The model
    prices the fold as 14 fewer ALU instructions per call and a shorter chain
    (`philox_chain_cycles`); it has no register-allocation term that could make fewer
    instructions slower, so it cannot show the backward's regression."""
    from perfmodel.ops.attention.op import DROPOUT_PHILOX, dropout_philox_variant
    h = hardware(hw)
    out = {}
    for direction in ("fwd", "bwd"):
        times = {}
        for fold in (True, False):
            with dropout_philox_variant("fa4", direction, fold):
                times[fold] = estimate(make_op("attention", direction=direction,
                                               **FA4_FOLD_SHAPE).demand(h), h).time_s
        shipped = DROPOUT_PHILOX[("fa4", direction)][0]
        out[direction] = {"model_saving_s": times[False] - times[True],
                          "published_saving_s": FA4_FOLD_PUBLISHED_SAVING_S[direction],
                          "shipped_fold": float(shipped), "model_time_s": times[shipped]}
    return out


def dropout_terms(attention: Op, hw: Hardware) -> dict[str, float]:
    """The fused-dropout terms of an attention op's main kernel(s), summed over passes, plus
    what each adds in seconds at the sustained SM clock: the Philox issue, the FMA-heavy
    IMAD.WIDE, the ALU work and the chain-latency stall (issue-equivalents) on the busiest SM.
    `serial_rng_s`: in passes whose RNG lies on the critical path (`rng_on_critical_path`, the
    attention op's RNG_SERIAL_RESOURCES added to the rest of the kernel), the longest of those
    times, which the pass pays on top of its MMAs; 0 where the RNG hides under them."""
    from perfmodel.engine import kernel_resource_times
    d = resolve(attention.demand(hw), hw)
    mains = [p for p in (d.sequence or (d,)) if "dropout" in p.details]
    out: dict[str, float] = {}
    for m in mains:
        t = m.details["dropout"]
        work = {"issue": t.get("rng_issue", 0.0) + t.get("chain_stall_issue", 0.0),
                "fma_heavy": t.get("philox_imad_wide", 0.0),
                "alu": t.get("philox_alu", 0.0) + t.get("mask_alu", 0.0)}
        times = kernel_resource_times(hw, work, m.launch.ctas)
        for k, v in t.items():
            out[k] = out.get(k, 0.0) + v
        for r, s in times.items():
            out[f"{r}_time_s"] = out.get(f"{r}_time_s", 0.0) + float(s)
        serial = max(float(v) for v in times.values()) if t.get("rng_on_critical_path") else 0.0
        out["serial_rng_s"] = out.get("serial_rng_s", 0.0) + serial
    return out


def paper_setup(hw: Hardware | str = "H100-SXM", model: str = "llama3-8b",
                seqs=(2048, 8192)) -> list[dict[str, Any]]:
    """The paper's setup (one Llama 3 block, H100, FP8) under the RNG variants the paper may
    have meant: FlashAttention's 8 bits per decision with Philox4x32-7, and one Philox4x32-10
    call per decision (cuRAND-style, 128 bits). Per sequence length: the RNG kernel's share of
    the sequential block and the speedups of overlap and rng_in_gemm."""
    out = []
    for bits, gen in ((8, "philox4x32-7"), (32, "philox4x32-10"), (128, "philox4x32-10")):
        for seq in seqs:
            cfg = DropoutConfig(bits_per_element=bits, generator=gen)
            r = evaluate(model, hw, seq=seq, dtype="fp8", cfg=cfg)
            out.append({"bits_per_element": bits, "generator": gen, "seq": seq,
                        "rng_share": r["sequential"].rng_time_s / r["sequential"].time_s,
                        "best": best_schedule(r), **speedups(r),
                        "rng_in_gemm_bound": r["rng_in_gemm"].saturated})
    return out


# ------------------------------------------------------------ the paper's headline, conditioned --

# The headline of arXiv:2410.07531 v2 (abstract): RNG overlapped with the preceding GEMMs is
# 1.26x faster than sequential and 1.22x faster than fused, one Llama 3 block on GH100 in FP8.
PAPER_OVERLAP_VS_SEQUENTIAL = 1.26
PAPER_OVERLAP_VS_FUSED = 1.22


def paper_implied() -> dict[str, float]:
    """What the headline implies, whatever the paper's model: overlapping can hide at most the
    RNG kernel, so sequential / overlap = 1.26 needs the RNG kernel to be at least
    1 − 1/1.26 = 20.6 % of the sequential block; and fused / sequential = 1.22 / 1.26 = 0.968:
    fused dropout costs the block a little less than the separate RNG kernel does."""
    return {"min_rng_share": 1.0 - 1.0 / PAPER_OVERLAP_VS_SEQUENTIAL,
            "fused_vs_sequential_time": PAPER_OVERLAP_VS_FUSED / PAPER_OVERLAP_VS_SEQUENTIAL}


def paper_conditions(hw: Hardware | str = "H100-SXM", model: str = "llama3-8b",
                     seqs=(2048, 4096, 8192), batch: int = 1, dtype: str = "fp8"
                     ) -> list[dict[str, Any]]:
    """The paper's setup under each condition the headline depends on: the pass (training
    forward, or forward and backward), the generator and random bits per decision (FA's 8 bits
    of Philox4x32-7, or one Philox4x32-10 call per decision), and the sequence length. Per row:
    the RNG kernel's share of the sequential block (`rng_share`, against paper_implied's
    minimum), what dropout costs the block fused and sequential (over the block without
    dropout), the SM slots (registers / shared memory / warps) the GEMMs before attention hold
    (`gemm_sm_slots`: 1 leaves a second stream no room), the SMs the best partition gives the RNG
    kernel, the speedups and the fastest schedule."""
    from perfmodel.contention import sm_slot_share
    m = load_model(model)
    h = hardware(hw)
    out = []
    for backward in (False, True):
        for bits, gen in ((8, "philox4x32-7"), (128, "philox4x32-10")):
            for seq in seqs:
                cfg = DropoutConfig(bits_per_element=bits, generator=gen, backward=backward)
                r = evaluate(m, h, batch=batch, seq=seq, dtype=dtype, cfg=cfg)
                base = _steady_block_time(m, "fused", dataclasses.replace(cfg, p=0.0), batch,
                                          seq, 1, dtype, h)[0]
                pred = _steady_block_time(m, "sequential", cfg, batch, seq, 1, dtype, h)[1]
                window = [o for o in pred.ops if _in_window(o.name)]
                slots = min(sm_slot_share(resolve(o.op.demand(h), h), h) for o in window)
                seq_t = r["sequential"].time_s
                out.append({"pass": "fwd+bwd" if backward else "fwd", "bits_per_element": bits,
                            "generator": gen, "seq": seq,
                            "rng_share": r["sequential"].rng_time_s / seq_t,
                            "fused_cost": r["fused"].time_s / base - 1.0,
                            "sequential_cost": seq_t / base - 1.0,
                            "gemm_sm_slots": slots,
                            "overlap_mode": r["overlap"].mode,
                            "partition_rng_sms": r["overlap"].variants["partition_rng_sms"],
                            "best": best_schedule(r), **speedups(r)})
    return out
