"""Model options shared by `predict` and `build`, and the graph they describe: a graph file as
it is, or a model (file or built-in name) expanded by the builder."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import NamedTuple

from perfmodel import yamlio
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph, parse_graph
from perfmodel.workloads.builder import KV_DTYPES, PHASES, Workload, build_graph
from perfmodel.workloads.models import (ModelSpec, is_model_file, list_models, load_model,
                                        parse_model)


def add_workload_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model options (when the file is a model)")
    g.add_argument("--phase", choices=PHASES)
    g.add_argument("--batch", type=int, default=1, help="sequences per step (per model replica)")
    g.add_argument("--seq", type=int, default=2048, help="prompt / training sequence length")
    g.add_argument("--context", type=int, help="decode: KV-cache length (default --seq)")
    g.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs")
    g.add_argument("--ep", type=int, default=1, help="expert-parallel GPUs")
    g.add_argument("--pp", type=int, default=1, help="pipeline stages")
    g.add_argument("--dp", type=int, default=1, help="data-parallel replicas (training)")
    g.add_argument("--dtype", default="bf16", help="GEMM dtype policy: bf16, fp8, mxfp8, nvfp4")
    g.add_argument("--kv-dtype", type=str.lower, choices=KV_DTYPES,
                   help="prefill/decode: KV-cache storage type (default: bf16, the activations')")
    g.add_argument("--microbatches", type=int, help="pipeline microbatches (default: up to 4·pp)")
    g.add_argument("--virtual-stages", type=int, default=1,
                   help="interleaved pipeline: model chunks per GPU (default 1)")


class Input(NamedTuple):
    """What `predict` and `build` were given: the graph, and for a model its workload."""
    graph: OpGraph
    model: ModelSpec | None = None
    workload: Workload | None = None


def read_input(args) -> Input:
    """A graph file as is, or a model (file or built-in name) built with the model options."""
    path = Path(args.file)
    if path.is_file():
        raw = yamlio.load(path, "graph or model file")
        if not is_model_file(raw):
            return Input(parse_graph(raw, str(path)))
        model = parse_model(raw, str(path))
    elif args.file.lower() in list_models():
        model = load_model(args.file)
    else:
        raise InputError(f"{args.file}: no such graph or model file (built-in models: "
                         f"{', '.join(list_models())})")
    if not args.phase:
        raise InputError(f"{args.file} is a model: give --phase prefill|decode|train")
    w = Workload(args.phase, batch=args.batch, seq=args.seq, context=args.context, tp=args.tp,
                 ep=args.ep, pp=args.pp, dp=args.dp, dtype=args.dtype,
                 microbatches=args.microbatches, virtual_stages=args.virtual_stages,
                 kv_dtype=args.kv_dtype)
    graph = build_graph(model, hardware=args.hw,
                        **{f.name: getattr(w, f.name) for f in dataclasses.fields(w)})
    return Input(graph, model, w)


def graph_from(args) -> OpGraph:
    """A graph file as is, or a model (file or built-in name) built with the model options."""
    return read_input(args).graph
