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
    g.add_argument("--moe-loads", metavar="FILE", help="MoE: route each layer from recorded "
                   "expert loads (SGLang logical_count JSON, a path or a shipped name)")
    g.add_argument("--moe-replication", type=float, default=1.0, help="MoE: expert slots / "
                   "experts (> 1 with --moe-loads: EPLB's redundant slots; default 1)")
    g.add_argument("--moe-variation", type=float, default=0.0, help="MoE with --moe-loads: "
                   "batch-to-batch log-normal sigma of expert popularity (default 0)")


# The flag each Workload field is set by: workload errors and warnings name what the user wrote
FLAGS = {"phase": "--phase", "batch": "--batch", "seq": "--seq", "context": "--context",
         "tp": "--tp", "ep": "--ep", "pp": "--pp", "dp": "--dp", "dtype": "--dtype",
         "kv_dtype": "--kv-dtype", "microbatches": "--microbatches",
         "virtual_stages": "--virtual-stages", "moe_loads": "--moe-loads",
         "moe_replication": "--moe-replication", "moe_variation": "--moe-variation"}


class Input(NamedTuple):
    """What `predict` and `build` were given: the graph, and for a model its workload and the
    warnings about options that do not apply to it."""
    graph: OpGraph
    model: ModelSpec | None = None
    workload: Workload | None = None
    warnings: tuple[str, ...] = ()


def given_flags(args) -> set[str]:
    """The Workload fields whose flags differ from the Workload's defaults (the options'
    defaults) on the command line."""
    defaults = {f.name: f.default for f in dataclasses.fields(Workload)}
    return {k for k in FLAGS if k != "phase" and getattr(args, k, None) != defaults[k]}


def warn(lines) -> None:
    """Print warnings on stderr, one line each (`perfmodel: warning: ...`)."""
    import sys
    from perfmodel.errors import printable
    for line in lines:
        print(f"perfmodel: warning: {printable(line)}", file=sys.stderr)


def read_input(args) -> Input:
    """A graph file as is, or a model (file or built-in name) built with the model options."""
    path = Path(args.file)
    if yamlio.is_file(path):
        raw = yamlio.load(path, "graph or model file")
        if not is_model_file(raw):
            unused = sorted(given_flags(args) | ({"phase"} if args.phase else set()))
            notes = tuple(f"{FLAGS[k]}: applies to a model; {args.file} is a graph file "
                          f"(ignored)" for k in unused)
            graph = parse_graph(raw, str(path))
            notes += tuple(f"{path}: op {n.name}: {key}: {msg}" for n in graph.nodes
                           for key, msg in n.op.warnings())
            model, workload, note = built_from(graph, str(path))
            return Input(graph, model, workload, notes + ((note,) if note else ()))
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
                 kv_dtype=args.kv_dtype, moe_loads=args.moe_loads,
                 moe_replication=args.moe_replication, moe_variation=args.moe_variation)
    w.check(model, names=FLAGS)  # errors name the flags, not the builder's fields
    try:
        graph = build_graph(model, hardware=args.hw,
                            **{f.name: getattr(w, f.name) for f in dataclasses.fields(w)})
    except InputError as e:  # an op of the step refused its derived sizes: say whose they are
        raise InputError([f"{args.file} --phase {args.phase} with these model options: an op "
                          f"of the step: {p}" for p in e.problems]) from None
    notes = tuple(f"{FLAGS[k]}: {msg}" for k, msg in w.warnings())
    return Input(graph, model, w, notes)


def built_from(graph: OpGraph, file: str) -> tuple[ModelSpec | None, Workload | None, str]:
    """The built-in model and workload a graph file was built from (`perfmodel build` writes
    them in `meta`), so that its memory is checked as the model's is; (None, None, a note) for a
    graph `perfmodel build` wrote from another model file, (None, None, "") for a graph written
    by hand (no `meta.model`)."""
    meta = graph.meta
    name = meta.get("model")
    if not isinstance(name, str) or "phase" not in meta:
        return None, None, ""
    if name.lower() not in list_models():
        return None, None, (f"{file}: built from model {name!r}, not a built-in one: its memory "
                            f"is not checked")
    fields = {f.name for f in dataclasses.fields(Workload)}
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in meta.items() if k in fields}
    try:
        w = Workload(**kw)
        model = load_model(name)
        w.check(model)
    except (InputError, TypeError) as e:
        return None, None, (f"{file}: meta does not describe a workload of {name} "
                            f"({yamlio.one_line(e)}): its memory is not checked")
    return model, w, ""


def graph_from(args) -> OpGraph:
    """A graph file as is, or a model (file or built-in name) built with the model options."""
    return read_input(args).graph
