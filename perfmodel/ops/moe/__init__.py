"""Mixture-of-experts layer under expert parallelism: the op, expert placement and routing
policies (`routing`), DeepSeek's EPLB placement (`eplb`), routing traces (`traces`) and routing
sampled from recorded per-layer expert loads (`loads`, files in `data/`)."""
from perfmodel.ops.moe.op import Moe

__all__ = ["Moe"]
