"""Mixture-of-experts layer under expert parallelism: the op, expert placement and routing
policies (`routing`), and routing traces (`traces`)."""
from perfmodel.ops.moe.op import Moe

__all__ = ["Moe"]
