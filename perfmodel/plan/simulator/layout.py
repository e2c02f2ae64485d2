"""A deployment's layout: one replica's parallelism (tp, ep, pp) and how many replicas serve side
by side; the search enumerates them (perfmodel.plan.search) and a disaggregated deployment has
one per pool (perfmodel.plan.simulator.disagg)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """`replicas` replicas of tp × pp (× ep) GPUs. A replica takes max(tp, ep) · pp GPUs, as the
    simulator counts them: with ep > tp the experts span ep GPUs and attention runs in ep / tp
    data-parallel groups, each its own scheduler."""

    tp: int = 1
    ep: int = 1
    pp: int = 1
    replicas: int = 1

    @property
    def gpus_per_replica(self) -> int:
        return max(self.tp, self.ep) * self.pp

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def schedulers(self) -> int:
        """Independent schedulers: replicas × data-parallel attention groups (ep / tp)."""
        return self.replicas * max(1, self.ep // self.tp)

    @property
    def label(self) -> str:
        """`TP4`, `TP1 EP8`, `TP2 PP4`: the replica's parallelism."""
        parts = [f"TP{self.tp}"]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        return " ".join(parts)
