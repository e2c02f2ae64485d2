"""Attention as FlashAttention-style tiles: `op` turns tiles into work, `tiles` cuts the problem."""
from perfmodel.ops.attention.op import Attention

__all__ = ["Attention"]
