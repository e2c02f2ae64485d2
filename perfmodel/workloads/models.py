"""Model files (models/*.yaml, docs/model-format.md): strict loading and parameter counts.

A ModelSpec is the architecture only. `perfmodel.workloads.builder` turns it into an op graph for
a phase, batch, lengths, dtype policy and parallelism.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from perfmodel import yamlio
from perfmodel.errors import InputError

MODEL_SCHEMA_VERSION = 1
ACTIVATIONS = ("swiglu", "gelu", "relu", "silu")
INT_KEYS = {  # key: (required, minimum)
    "hidden": (True, 1), "layers": (True, 1), "heads": (True, 1), "kv_heads": (True, 1),
    "head_dim": (True, 1), "ffn_hidden": (True, 1), "vocab": (True, 1),
    "experts": (False, 0), "top_k": (False, 0), "expert_hidden": (False, 0),
    "shared_experts": (False, 0), "dense_layers": (False, 0),
    "q_lora_rank": (False, 0), "kv_lora_rank": (False, 0), "qk_nope_head_dim": (False, 0),
    "qk_rope_head_dim": (False, 0), "v_head_dim": (False, 0),
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str
    params_total_stated: float
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    activation: str = "swiglu"
    tie_embeddings: bool = False
    experts: int = 0
    top_k: int = 0
    expert_hidden: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    path: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer >= self.dense_layers

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices per FFN: gate, up, down for gated activations; up, down otherwise."""
        return 3 if self.activation == "swiglu" else 2

    # ---- parameter counts (elements) -------------------------------------------------------
    def attention_params(self) -> int:
        h = self.hidden
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * self.heads * qk
                 if self.q_lora_rank else h * self.heads * qk)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) \
                + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + self.heads * self.v_head_dim * h
        return h * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * h

    def ffn_params(self, layer: int, active: bool = False) -> int:
        h = self.hidden
        if not self.is_moe_layer(layer):
            return self.ffn_matrices * h * self.ffn_hidden
        experts = self.top_k if active else self.experts
        per_expert = self.ffn_matrices * h * self.expert_hidden
        return (experts + self.shared_experts) * per_expert + h * self.experts  # + router

    def params(self, active: bool = False) -> int:
        """Total (or per-token activated) parameters, embeddings and LM head included."""
        emb = self.vocab * self.hidden * (1 if self.tie_embeddings else 2)
        layers = sum(self.attention_params() + self.ffn_params(i, active)
                     for i in range(self.layers))
        return emb + layers

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "path"}


def builtin_model_dir() -> Path:
    installed = Path(__file__).resolve().parents[1] / "models"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "models"


def list_models() -> list[str]:
    return sorted(p.stem for p in builtin_model_dir().glob("*.yaml"))


def is_model_file(raw: Any) -> bool:
    return isinstance(raw, dict) and "layers" in raw and "ops" not in raw


def parse_model(raw: Any, file: str = "<model>") -> ModelSpec:
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a mapping of model architecture keys")
    problems: list[str] = []
    allowed = set(INT_KEYS) | {"schema_version", "name", "source", "params_total", "activation",
                               "tie_embeddings"}
    for k in raw:
        if k not in allowed:
            problems.append(f"{file}: {k}: unknown key (expected one of {sorted(allowed)})")
    if raw.get("schema_version") != MODEL_SCHEMA_VERSION:
        problems.append(f"{file}: schema_version: expected {MODEL_SCHEMA_VERSION}, "
                        f"got {raw.get('schema_version')!r}")
    values: dict[str, Any] = {}
    for k, (required, lo) in INT_KEYS.items():
        if k not in raw:
            if required:
                problems.append(f"{file}: {k}: missing required key (a positive integer)")
            continue
        v = raw[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            problems.append(f"{file}: {k}: expected an integer >= {lo}, got {v!r}")
        values[k] = v
    src = raw.get("source")
    if not (isinstance(src, dict) and isinstance(src.get("title"), str)
            and isinstance(src.get("url"), str)):
        problems.append(f"{file}: source: expected {{title, url}} saying where the numbers "
                        f"come from")
    stated = raw.get("params_total", {})
    if not (isinstance(stated, dict) and isinstance(stated.get("value"), (int, float))
            and isinstance(stated.get("source"), str)):
        problems.append(f"{file}: params_total: expected {{value, source, url}} (the stated "
                        f"parameter count)")
    act = raw.get("activation", "swiglu")
    if act not in ACTIVATIONS:
        problems.append(f"{file}: activation: expected one of {ACTIVATIONS}, got {act!r}")
    if not problems:
        if values["heads"] % values["kv_heads"]:
            problems.append(f"{file}: kv_heads: must divide heads ({values['heads']})")
        if values.get("experts") and not 0 < values.get("top_k", 0) <= values["experts"]:
            problems.append(f"{file}: top_k: expected 1..experts for an MoE model")
        if values.get("experts") and not values.get("expert_hidden"):
            problems.append(f"{file}: expert_hidden: required for an MoE model")
    if problems:
        raise InputError(problems)
    return ModelSpec(name=str(raw.get("name") or Path(file).stem), source=src["url"],
                     params_total_stated=float(stated["value"]), activation=act,
                     tie_embeddings=bool(raw.get("tie_embeddings", False)), path=file, **values)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A built-in model by name (`llama3-70b`) or a model file by path."""
    s = str(name_or_path)
    p = Path(s)
    if not (s.endswith((".yaml", ".yml")) or p.is_file()):
        p = builtin_model_dir() / f"{s.lower()}.yaml"
        if not p.is_file():
            raise InputError(f"unknown model '{s}' (built-in: {', '.join(list_models())}; or "
                             f"give a model file path)")
    return parse_model(yamlio.load(p, "model file"), str(p))
