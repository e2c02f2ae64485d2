"""The shipped table of calibrated routing log-weights for the shipped expert-loads files.

Calibrating one layer of `perfmodel.ops.moe.loads` (24 stochastic-approximation iterations of
8,192 group-limited Gumbel-top-k tokens) costs about one second of one core, so a study of the 58
MoE layers of DeepSeek-V3 would spend a minute on it before it prices anything. The calibration
is deterministic (fixed seed), so for the files shipped in perfmodel/ops/moe/data (and the
checkout's validation loads, REPO_LOADS) it is computed once and shipped here
(`data/calibrated.npz`), keyed by a digest of everything it depends on:
the layer's shares, the layer index (the seed), the routing (top_k, groups, group_top_k) and the
calibration constants. A changed constant or a changed file misses the table and is calibrated
afresh, never read stale; a test checks that the table covers the shipped files and that an
entry equals a fresh calibration bit for bit.

Regenerate after changing the calibration: `python -m perfmodel.ops.moe.calibrated`.
"""
from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

import numpy as np

TABLE = Path(__file__).resolve().parent / "data" / "calibrated.npz"
# The routing the shipped files were recorded under: DeepSeek-V3/R1 (config.json num_experts_per_tok
# = 8, n_group = 8, topk_group = 4).
SHIPPED_ROUTING = (8, 8, 4)
# The checkout's validation loads (validate/data/moe_loads: the LMSYS prefill pool's recorded
# loads that perfmodel.validation.moe_ep replays, 58 layers, ~25 s to calibrate): written into
# the table too when it is regenerated from a checkout. Lookups go by content digest, so an
# installed package without these files reads nothing it misses.
REPO_LOADS = Path(__file__).resolve().parents[3] / "validate" / "data" / "moe_loads"


def digest(layer: int, top_k: int, groups: int, group_top_k: int | None,
           shares_bytes: bytes) -> str:
    """The table key of one layer's calibration: a SHA-256 over its inputs and constants."""
    from perfmodel.ops.moe import loads
    h = hashlib.sha256()
    h.update(repr((layer, top_k, groups, group_top_k, loads.CALIBRATION_TOKENS,
                   loads.CALIBRATION_ITERATIONS, loads.CALIBRATION_SEED)).encode())
    h.update(shares_bytes)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, np.ndarray]:
    if not TABLE.is_file():
        return {}
    with np.load(TABLE) as z:
        return {k: z[k] for k in z.files}


def lookup(key: str) -> np.ndarray | None:
    """The shipped calibration for a digest, or None (then the caller calibrates)."""
    return _table().get(key)


def _shipped_layers():
    """(file name, layer, the layer's shares) for every MoE layer of every shipped loads file
    and of the checkout's validation loads (REPO_LOADS), each file read once."""
    from perfmodel.ops.moe.loads import DATA_DIR, load_expert_loads
    repo = sorted(REPO_LOADS.glob("*.json")) if REPO_LOADS.is_dir() else []
    for path in sorted(DATA_DIR.glob("*.json")) + repo:
        loads = load_expert_loads(path)
        for layer in loads.moe_layers:
            yield path.name, layer, loads.shares(layer)


def shipped_entries() -> dict[str, tuple[str, int]]:
    """digest -> (file name, layer) for every MoE layer of every shipped loads file (and the
    checkout's validation loads) under the shipped routing."""
    return {digest(layer, *SHIPPED_ROUTING, shares.tobytes()): (name, layer)
            for name, layer, shares in _shipped_layers()}


def write_table(path: Path = TABLE, log=None) -> int:
    """Calibrate every shipped layer afresh and write the table; returns the entry count.
    `log(message)` hears of each file as it starts."""
    from perfmodel.ops.moe.loads import calibrate_log_weights
    arrays, started = {}, set()
    for name, layer, shares in _shipped_layers():
        if log and name not in started:
            started.add(name)
            log(f"calibrating {name} (about 1 s per layer)")
        data = shares.tobytes()
        arrays[digest(layer, *SHIPPED_ROUTING, data)] = calibrate_log_weights(
            layer, *SHIPPED_ROUTING, data)
    np.savez_compressed(path, **arrays)
    _table.cache_clear()
    return len(arrays)


if __name__ == "__main__":  # pragma: no cover - the regeneration entry point
    n = write_table(log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"wrote {n} calibrated layers to {TABLE}", file=sys.stderr)
