"""Grouped GEMM: G independent GEMMs C_g[M_g, N] = A_g[M_g, K] · B_g[K, N] in one launch (the
expert FFNs of a mixture-of-experts layer: torch._grouped_mm, CUTLASS grouped/ptr-array GEMM,
DeepGEMM's m-grouped kernels).

The groups share N and K and differ in M (tokens routed to each expert). Like the GEMM model
(ops/gemm.py, whose tiles, pipelines and fixed costs it reuses):
  * one persistent launch walks every group's tiles (CUTLASS PersistentTileSchedulerSm90Group /
    sm100 group scheduler; DeepGEMM's persistent scheduler): sum over groups of
    ceil(M_g / tm) · ceil(N / tn) tiles, the busiest SM running ceil(tiles / SMs) of them; no
    split-K (the grouped schedulers have none);
  * each group's M is padded to the tile's M: the MMAs of a group's last M tile run in full, the
    padding rows are wasted tensor work;
  * each active group's weights are read from HBM once (G·N·K bytes when the group's operands
    fit in L2; a large group re-reads them per wave like a GEMM), its activations once;
  * layouts: `contiguous` packs the groups' rows back to back (torch._grouped_mm offsets,
    DeepGEMM m_grouped_*_contiguous): TMA clips each group's tiles at its own rows, so padding
    costs MMA work only; `masked` gives every group a fixed `capacity` of rows (DeepGEMM
    m_grouped_*_masked, the decode layout under CUDA graphs, whose kernel skips the tiles
    beyond each group's valid rows): the padded rows of a group's last tile are inside its
    slab and are read and written too;
  * ragged groups of unknown sizes (`groups` and `m`, no `group_m`): rows routed to the groups
    uniformly at random (a multinomial, the balanced router's expectation), so a group's rows
    X ~ Binomial(m, 1/G) and its expected M tiles are E[ceil(X / tm)] = Σ_j P(X > j·tm); the
    expected empty groups read no weights;
  * FP8 (per-tensor or DeepSeek-V3 1x128/128x128 block scales, promoted on the CUDA cores where
    the MMA takes no scales), MXFP8/NVFP4/MXFP4 with their block-scale bytes, as in the GEMM.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from perfmodel.demand import Demand, KernelCandidates, Overlap
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.gemm import (FP8_BLOCK, MMA_DTYPES, candidate_launch, ceil_div,
                                default_persistent, fixed_costs, fp4_mma_n, fp8_blocks_promoted,
                                hbm_operand_bytes, tile_table)
from perfmodel.units import DTYPE_BYTES, bytes_per_element, tensor_dtype

GROUPED_DTYPES = tuple(d for d in MMA_DTYPES if d != "fp32")  # tensor-core kernels only
LAYOUTS = ("contiguous", "masked")
# Binomial tail mass left out of the expected-tile sums (far below any time resolution)
TAIL_SIGMAS = 12.0


@dataclass(frozen=True)
class RowsParam(Param):
    """A list of non-negative row counts (one per group)."""

    def expectation(self) -> str:
        return "a non-empty list of integers >= 0 (rows per group)"

    def coerce(self, value):
        if value is None and self.nullable:
            return None
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError
        out = []
        for v in value:
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError
            out.append(v)
        return out


@dataclass(frozen=True)
class Groups:
    """The non-empty groups as size classes: `weight` groups of `rows` valid rows each (exact
    for group_m; for ragged groups one class of the expected active groups at their mean)."""

    rows: np.ndarray    # (classes,) valid rows of one group of the class
    weight: np.ndarray  # (classes,) groups in the class

    @property
    def useful_rows(self) -> float:
        return float(np.sum(self.rows * self.weight))

    @property
    def active(self) -> float:
        return float(np.sum(self.weight))


@functools.lru_cache(maxsize=4096)
def _candidates(key: tuple, hw: Hardware) -> KernelCandidates:
    """Memoized candidates per (problem, GPU), as the GEMM's."""
    return GroupedGemm(**dict(key)).kernel_candidates(hw)


class GroupedGemm(Op):
    """G GEMMs sharing N and K with per-group M, one launch (docs/graph-format.md
    "grouped_gemm")."""

    name = "grouped_gemm"
    EXAMPLE = dict(groups=8, m=16384, n=4096, k=2048, dtype="bf16")
    PARAMS = {
        "groups": Param("int", default=None, nullable=True, lo=1,
                        doc="groups (experts) G (none: len(group_m))"),
        "m": Param("int", default=None, nullable=True, lo=1, unit="rows",
                   doc="rows over all groups (routed tokens); without group_m the groups are "
                       "ragged, of unknown sizes routed uniformly at random (none: sum of "
                       "group_m, or groups x capacity when masked)"),
        "group_m": RowsParam("list", default=None, nullable=True, unit="rows",
                             doc="rows of each group (exact sizes)"),
        "n": positive("columns", "columns of each group's B and C (output features)"),
        "k": positive("elements", "reduction dimension"),
        "dtype": Param("dtype", required=True, choices=GROUPED_DTYPES,
                       doc="tensor-core input type of A and B"),
        "out_dtype": Param("dtype", default="bf16", doc="type of C"),
        "layout": Param("choice", default="contiguous", choices=LAYOUTS,
                        doc="contiguous: groups' rows back to back; masked: a fixed capacity "
                            "of rows per group, padding rows moved too"),
        "capacity": Param("int", default=None, nullable=True, lo=1, unit="rows",
                          doc="masked layout: rows allocated per group"),
        "fp8_scaling": Param("choice", default="tensor", choices=("tensor", "block"),
                             doc="fp8 scales: one per tensor, or DeepSeek-V3 blocks (1x128 "
                                 "activations, 128x128 weights per group)"),
        "persistent": Param("bool", default=None, nullable=True,
                            doc="persistent warp-specialized kernel (none: the ISA's default, "
                                "as for gemm)"),
    }
    SIZE_PARAMS = ("groups", "m", "n", "k")
    TENSORS = (("m", "k"), ("groups", "k", "n"), ("m", "n"), ("groups", "capacity", "k"))

    def check(self, v):
        out = []
        gm, groups, m, cap = v["group_m"], v["groups"], v["m"], v["capacity"]
        if gm is not None:
            if groups is not None and groups != len(gm):
                out.append(("groups", f"groups ({groups}) differs from len(group_m) "
                                      f"({len(gm)})"))
            if m is not None and m != sum(gm):
                out.append(("m", f"m ({m}) differs from sum(group_m) ({sum(gm)})"))
            if sum(gm) == 0:
                out.append(("group_m", "every group is empty"))
            if cap is not None and max(gm) > cap:
                out.append(("group_m", f"a group of {max(gm)} rows exceeds capacity ({cap})"))
        elif groups is None:
            out.append(("groups", "give groups (with m, or capacity when masked) or group_m"))
        elif m is None and (v["layout"] != "masked" or cap is None):
            out.append(("m", "give m (rows over all groups) or group_m"))
        if v["layout"] == "masked" and cap is None:
            out.append(("capacity", "the masked layout needs capacity (rows per group)"))
        if v["layout"] == "contiguous" and cap is not None:
            out.append(("capacity", "capacity applies to the masked layout only"))
        if cap is not None and m is not None and groups is not None and m > groups * cap:
            out.append(("m", f"m ({m}) exceeds groups x capacity ({groups * cap})"))
        if v["fp8_scaling"] == "block" and tensor_dtype(v["dtype"]) != "fp8":
            out.append(("fp8_scaling", f"block scaling applies to fp8, not {v['dtype']}"))
        return out

    # ---- the problem ------------------------------------------------------------------------
    @property
    def group_count(self) -> int:
        return self.groups if self.groups is not None else len(self.group_m)

    @property
    def total_rows(self) -> int:
        if self.group_m is not None:
            return sum(self.group_m)
        if self.m is not None:
            return self.m
        return self.group_count * self.capacity

    @functools.cached_property
    def _groups(self) -> Groups:
        if self.group_m is not None:
            sizes, weight = np.unique(np.array(self.group_m), return_counts=True)
            keep = sizes > 0
            return Groups(sizes[keep].astype(float), weight[keep].astype(float))
        g, rows = self.group_count, self.total_rows
        if self._exact:  # one group, or masked groups given no m: every slab full
            return Groups(np.array([rows / g]), np.array([float(g)]))
        # ragged: X ~ Binomial(rows, 1/G) rows per group; a masked group keeps at most its
        # capacity; the expected active groups G·P(X > 0) share the expected valid rows
        cap = self.capacity if self.layout == "masked" else None
        valid = rows if cap is None else g * float(np.sum(self._tail(np.arange(cap))))
        active = g * -math.expm1(rows * math.log1p(-1.0 / g))
        return Groups(np.array([valid / active]), np.array([active]))

    @property
    def _exact(self) -> bool:
        """Group sizes known: listed, a single group, or masked slabs with no m (all full)."""
        return self.group_m is not None or self.group_count == 1 or self.m is None

    def _tail(self, x: np.ndarray) -> np.ndarray:
        """P(X > x) for a ragged group's rows X ~ Binomial(m, 1/G): the regularized incomplete
        beta I_p(x + 1, m − x) (scipy.special.betainc: Boost's ibeta, which scipy.stats.binom.sf
        evaluates too, bit for bit, without scipy.stats's ~0.5 s import), 1 below 0, 0 from m."""
        from scipy.special import betainc  # imported on use
        n, p = self.total_rows, 1.0 / self.group_count
        x = np.asarray(x, dtype=float)
        out = np.where(x < 0, 1.0, 0.0)
        inside = (x >= 0) & (x < n)
        out[inside] = betainc(x[inside] + 1.0, n - x[inside], p)
        return out

    @property
    def flop(self) -> float:
        return 2.0 * self._groups.useful_rows * self.n * self.k

    def _m_tiles(self, tm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(M tiles, rows the kernel moves) of one group of each size class (classes × tile
        heights): ceil(rows / tm) and the rows (the masked layout's slab padding included) for
        exact sizes; their expectations per active group for ragged groups."""
        gr = self._groups
        cap = self.capacity if self.layout == "masked" else None
        if self._exact:
            rows = gr.rows[:, None]
            tiles = ceil_div(rows, tm[None, :])
            moved = rows if cap is None else np.minimum(tiles * tm[None, :], cap)
            return tiles, np.broadcast_to(moved, tiles.shape)
        g, total = self.group_count, self.total_rows
        lam = total / g
        hi = lam + TAIL_SIGMAS * math.sqrt(lam * (1 - 1 / g)) + 1
        points = [np.arange(math.ceil(hi / t) if cap is None else math.ceil(cap / t)) * t
                  for t in tm]
        # one tail evaluation at the union of the tile heights' points (their multiples
        # overlap), the same doubles as evaluating each height's own points
        union = np.unique(np.concatenate(points))
        tails = self._tail(union)
        tiles, moved = [], []
        for t, j in zip(tm, points):
            tail = tails[np.searchsorted(union, j)]  # P(X > j·t): the group has a (j+1)-th M tile
            tiles.append(g * float(np.sum(tail)))
            # masked: the (j+1)-th tile moves min(t, capacity − j·t) rows of the slab
            moved.append(gr.useful_rows if cap is None
                         else g * float(np.sum(tail * np.minimum(t, cap - j))))
        return np.array([tiles]) / gr.active, np.array([moved]) / gr.active

    def _dtype_key(self) -> tuple:
        b = bytes_per_element(self.dtype)
        return tensor_dtype(self.dtype), b, b, bytes_per_element(self.out_dtype)

    def promotes_on_cuda_cores(self, hw: Hardware) -> bool:
        """As Gemm: block-scaled FP8 on tensor cores without a block-scaled MMA for it."""
        return self.fp8_scaling == "block" and fp8_blocks_promoted(hw)

    def is_persistent(self, hw: Hardware) -> bool:
        if self.persistent is not None:
            return self.persistent
        return default_persistent(hw, tensor_dtype(self.dtype))

    # ---- demand -----------------------------------------------------------------------------
    def demand(self, hw: Hardware) -> KernelCandidates:
        compute = tensor_dtype(self.dtype)
        if not hw.supports(compute):
            raise InputError(f"grouped_gemm dtype '{self.dtype}' is not supported by {hw.name}'s "
                             f"tensor cores ({hw.mma_instruction}; supported: "
                             f"{', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in self.params.items())
        return _candidates(key, hw)

    def kernel_candidates(self, hw: Hardware) -> KernelCandidates:
        """Every tile of the GPU's instruction family, as arrays for the engine to score."""
        w = self._work(hw)
        overlap = Overlap(("tensor:fp8",), ("fma",), 0.0) if w["promoted"] else None
        return KernelCandidates(
            work=w["work"], ctas=w["ctas"], threads_per_cta=w["threads"],
            registers_per_thread=w["registers"], smem_per_cta_bytes=w["smem"],
            bytes_in_flight_per_cta=w["in_flight"], kernels=np.ones(len(w["ctas"]), int),
            valid=w["valid"], overlap=overlap, demand_at=functools.partial(self._demand_at, w),
            what=f"grouped_gemm {self!r}", serial_work=w["serial_work"],
            serial_round_trips=w["serial_round_trips"])

    def unique_bytes(self) -> tuple[float, float, float]:
        """HBM bytes of A, B and C the problem needs (valid rows, active groups' weights)."""
        _, a_b, b_b, c_b = self._dtype_key()
        rows, k, n = self._groups.useful_rows, self.k, self.n
        a_scales, b_scales = self._fp8_block_scales(rows)
        return (rows * k * a_b + a_scales, self._groups.active * (n * k * b_b + b_scales),
                rows * n * c_b)

    def _fp8_block_scales(self, rows) -> tuple:
        """FP32 block scales: per 1x128 of A's rows, per 128x128 of each group's B."""
        if self.fp8_scaling != "block":
            return 0.0, 0.0
        kb = ceil_div(self.k, FP8_BLOCK)
        return rows * kb * 4.0, kb * ceil_div(self.n, FP8_BLOCK) * 4.0

    def _work(self, hw: Hardware) -> dict:
        compute, a_b, b_b, c_b = self._dtype_key()
        op_b = DTYPE_BYTES[compute]
        table = tile_table(hw, compute, a_b, b_b, c_b)
        kblock, tm, tn = table["kblock"], table["m"], table["n"]
        cluster, b_share = table["cluster"], table["b_share"]
        n, k = self.n, self.k
        k_pad = ceil_div(k, kblock) * kblock
        gr = self._groups
        tiles_g, moved_g = self._m_tiles(tm)           # one group of each class
        m_tiles = np.sum(tiles_g * gr.weight[:, None], axis=0)
        moved = np.sum(moved_g * gr.weight[:, None], axis=0)
        # expected tiles for ragged groups, as whole CTAs: each CTA does one whole tile's work
        # (dividing the expected work over the rounded-up CTAs would make each a fraction of a
        # tile, and more groups could come out faster)
        tiles = np.maximum(1, np.ceil(m_tiles * ceil_div(n, tn) - 1e-9))
        ctas = tiles.astype(int)
        valid = table["fits"].copy()
        promoted = self.promotes_on_cuda_cores(hw)
        if promoted:
            valid &= tn <= FP8_BLOCK  # one weight scale per 128-wide N tile (sm90 blockwise)

        # narrow FP4 tiles at the block-scaled MMA's granule (gemm.FP4_MMA_N)
        work: dict[str, np.ndarray] = {
            f"tensor:{compute}": tiles * 2.0 * tm * fp4_mma_n(hw, compute, tn) * k_pad}
        fma = tiles * tm * tn * 1.0  # epilogue scaling and conversion
        if promoted:  # every 128 of K the partial sums are scaled into FP32 on the CUDA cores
            fma = fma + tiles * tm * tn * (k_pad / FP8_BLOCK)
        work["fma"] = fma
        work["smem"] = tiles * k_pad * (tm + tn * b_share) * op_b + tiles * 2.0 * tm * tn * c_b

        # HBM per group, a GEMM of its moved rows (A once, its weights once while its tiles are
        # co-resident, re-read per wave past L2) summed over the groups
        a_scale, b_scale = self._fp8_block_scales(1.0)
        hbm_g = hbm_operand_bytes(hw, gr.rows[:, None], n, k, tm[None, :], tn[None, :],
                                  moved_g * (k * a_b + a_scale), n * k * b_b + b_scale, a_b, b_b)
        c_bytes = moved * n * c_b
        work["l2"] = tiles * (tm * a_b + tn * b_b / cluster) * k + c_bytes
        work["hbm"] = np.sum(hbm_g * gr.weight[:, None], axis=0) + c_bytes
        serial, round_trips = fixed_costs(hw, table, np.arange(len(tm)), tiles,
                                          np.full(len(tm), k), c_bytes / tiles, a_b, b_b, op_b,
                                          c_b, self.is_persistent(hw))
        return {"work": work, "ctas": ctas, "threads": table["threads"],
                "registers": table["registers"], "smem": table["smem"],
                "in_flight": table["in_flight"], "stages": table["stages"], "valid": valid,
                "tiles": tiles, "m_tiles": m_tiles, "moved": moved, "kblock": kblock,
                "tile": table["tiles"], "promoted": promoted, "serial_work": serial,
                "serial_round_trips": round_trips, "persistent": self.is_persistent(hw)}

    def _demand_at(self, w: dict, i: int) -> Demand:
        tile = w["tile"][i]
        a_bytes, b_bytes, c_bytes = self.unique_bytes()
        launch, label, overlap = candidate_launch(w, i)
        padded = float(w["m_tiles"][i]) * tile.m
        return Demand(work={r: float(v[i]) for r, v in w["work"].items()}, launch=launch,
                      flop=self.flop, hbm_bytes=a_bytes + b_bytes + c_bytes, overlap=overlap,
                      serial_work={r: float(v[i]) for r, v in w["serial_work"].items()},
                      serial_round_trips=float(w["serial_round_trips"][i]),
                      details={"tile": label, "tiles": float(w["tiles"][i]),
                               "stages": int(w["stages"][i]), "layout": self.layout,
                               "active_groups": self._groups.active,
                               "padding_fraction": 1.0 - self._groups.useful_rows / padded,
                               "persistent": w["persistent"]})
