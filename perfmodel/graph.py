"""Op graphs: load, validate and write graph files (docs/graph-format.md "Graph file").

A graph is a list of named ops with dependencies (`after`, default: the previous op in the list)
and streams (ops on one stream run in list order; ops on different streams may run at once).
Validation reports every problem with file, key path and expectation: unknown op or parameter,
bad values, duplicate names, dangling dependencies, cycles, a missing `ops` list, a malformed
`meta.pipeline`.

`meta` holds free-form settings for reports (the builder's model, phase, batch...), except
`meta.pipeline`, which the scheduler reads: it loads into the typed `OpGraph.pipeline`
(`Pipeline`) and is written back under `meta` when the graph is dumped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import networkx as nx

from perfmodel import yamlio
from perfmodel.errors import InputError
from perfmodel.ops import Op, op as make_op

GRAPH_SCHEMA_VERSION = 1
DEFAULT_STREAM = "main"
NODE_KEYS = ("name", "op", "after", "stream")
PIPELINE_KEY = "pipeline"  # the one `meta` entry the scheduler reads (as `OpGraph.pipeline`)


class Node(NamedTuple):
    """One op of a graph (a named tuple: graphs of thousands of nodes build fast)."""

    name: str
    op: Op
    after: tuple[str, ...]
    stream: str = DEFAULT_STREAM


@dataclass(frozen=True)
class Pipeline:
    """A 1F1B pipeline-parallel step of one stage (Narayanan et al. 2021, §2.2): the graph's
    first `per_microbatch_ops` ops are one microbatch of the stage's work and run `microbatches`
    times, with a bubble of (stages − 1)/virtual_stages microbatch times; the ops after them
    (gradient sync, optimizer) run once per step."""

    per_microbatch_ops: int
    stages: int
    microbatches: int
    virtual_stages: int = 1

    def to_dict(self) -> dict[str, int]:
        """The graph file's `meta.pipeline` mapping."""
        return {"stages": self.stages, "microbatches": self.microbatches,
                "virtual_stages": self.virtual_stages,
                "per_microbatch_ops": self.per_microbatch_ops}


def parse_pipeline(raw: Any, ops: int, at: str) -> tuple[Pipeline | None, list[str]]:
    """A `meta.pipeline` mapping as a Pipeline (None if absent or empty) and its problems;
    `ops` is the graph's op count."""
    if not raw:
        return None, []
    if not isinstance(raw, dict):
        return None, [f"{at}: expected a mapping with stages, microbatches, virtual_stages, "
                      f"per_microbatch_ops"]
    problems = [f"{at}.{k}: unknown key (expected stages, microbatches, virtual_stages, "
                f"per_microbatch_ops)" for k in raw
                if k not in ("stages", "microbatches", "virtual_stages", "per_microbatch_ops")]
    values = {}
    for key, hi, required in (("stages", None, True), ("microbatches", None, True),
                              ("virtual_stages", None, False), ("per_microbatch_ops", ops, True)):
        if key not in raw:
            if required:
                problems.append(f"{at}.{key}: missing (expected a positive integer)")
            continue
        v = raw[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1 or (hi and v > hi):
            bound = f" of at most {hi} (the graph's ops)" if hi else ""
            problems.append(f"{at}.{key}: expected a positive integer{bound}, got {v!r}")
            continue
        values[key] = v
    return (None if problems else Pipeline(**values)), problems


@dataclass
class OpGraph:
    """Ops in list order plus their dependency DAG (networkx).

    `meta`: settings for reports (free-form; `meta.pipeline` of a graph file is `pipeline`);
    `pipeline`: the 1F1B pipeline schedule of this stage, None for a plain graph."""

    name: str
    nodes: list[Node]
    hardware: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    pipeline: Pipeline | None = None

    def __post_init__(self):
        if PIPELINE_KEY in self.meta:
            raise ValueError(f"graph '{self.name}': pass the pipeline as OpGraph(pipeline="
                             f"Pipeline(...)), not in meta")
        self._index = {n.name: n for n in self.nodes}

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: object) -> bool:
        """Whether the graph has an op of this name."""
        return name in self._index

    def node(self, name: str) -> Node:
        return self._index[name]

    def dag(self) -> "nx.DiGraph":
        """Dependencies plus stream order as edges (what the scheduler honours), as a networkx
        DiGraph for analysis (critical paths, drawing, topological queries)."""
        import networkx as nx  # imported on use: it costs 0.2 s of CLI start-up
        g = nx.DiGraph()
        last_on_stream: dict[str, str] = {}
        for n in self.nodes:
            g.add_node(n.name)
            for d in n.after:
                g.add_edge(d, n.name)
            prev = last_on_stream.get(n.stream)
            if prev is not None:
                g.add_edge(prev, n.name)
            last_on_stream[n.stream] = n.name
        return g

    def to_dict(self) -> dict[str, Any]:
        ops = []
        prev = None
        for n in self.nodes:
            entry: dict[str, Any] = {"name": n.name, **n.op.to_dict()}
            if list(n.after) != ([prev] if prev else []):
                entry["after"] = list(n.after)
            if n.stream != DEFAULT_STREAM:
                entry["stream"] = n.stream
            ops.append(entry)
            prev = n.name
        out: dict[str, Any] = {"schema_version": GRAPH_SCHEMA_VERSION, "name": self.name}
        if self.hardware:
            out["hardware"] = self.hardware
        meta = dict(self.meta)
        if self.pipeline is not None:
            meta[PIPELINE_KEY] = self.pipeline.to_dict()
        if meta:
            out["meta"] = meta
        out["ops"] = ops
        return out

    def dump(self, path: str | Path | None = None) -> str:
        text = yamlio.dump(self.to_dict())
        if path is not None:
            Path(path).write_text(text)
        return text


def parse_graph(raw: Any, file: str = "<graph>") -> OpGraph:
    """Validate a parsed graph mapping; raises InputError listing every problem."""
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a mapping with `ops:` at the top level")
    problems: list[str] = []
    for key in raw:
        if key not in ("schema_version", "name", "hardware", "ops", "meta"):
            problems.append(f"{file}: {key}: unknown key (expected schema_version, name, "
                            f"hardware, ops, meta)")
    if raw.get("schema_version", GRAPH_SCHEMA_VERSION) != GRAPH_SCHEMA_VERSION:
        problems.append(f"{file}: schema_version: expected {GRAPH_SCHEMA_VERSION}, "
                        f"got {raw.get('schema_version')!r}")
    hw = raw.get("hardware")
    if hw is not None and not isinstance(hw, str):
        problems.append(f"{file}: hardware: expected a hardware name or spec path")
    entries = raw.get("ops")
    if not isinstance(entries, list) or not entries:
        problems.append(f"{file}: ops: expected a non-empty list of ops")
        raise InputError(problems)

    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        at = f"{file}: ops[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{at}: expected a mapping with `op:` and its parameters")
            continue
        kind = entry.get("op")
        name = entry.get("name", f"{kind}{i}")
        if not isinstance(name, str) or not name:
            problems.append(f"{at}.name: expected a non-empty string")
            continue
        at = f"{file}: ops[{i}] ({name})"
        if name in seen:
            problems.append(f"{at}.name: duplicate name (also ops[{seen[name]}])")
        seen[name] = i
        after = entry.get("after", [nodes[-1].name] if nodes else [])
        if isinstance(after, str):
            after = [after]
        if not (isinstance(after, list) and all(isinstance(a, str) for a in after)):
            problems.append(f"{at}.after: expected a list of op names")
            after = []
        stream = entry.get("stream", DEFAULT_STREAM)
        if not isinstance(stream, (str, int)):
            problems.append(f"{at}.stream: expected a stream name")
            stream = DEFAULT_STREAM
        if not isinstance(kind, str):
            problems.append(f"{at}.op: missing op name (expected one of the `perfmodel ops` "
                            f"vocabulary)")
            continue
        params = {k: v for k, v in entry.items() if k not in NODE_KEYS}
        try:
            o = make_op(kind, **params)
        except InputError as e:
            problems += [f"{at}.{p}" if not p.startswith("<op>") else f"{at}: {p[6:]}"
                         for p in e.problems]
            continue
        nodes.append(Node(name, o, tuple(after), str(stream)))
    names = {n.name for n in nodes}
    for n in nodes:
        for d in n.after:
            if d not in names and d not in seen:
                problems.append(f"{file}: ops[{seen[n.name]}] ({n.name}).after: unknown op "
                                f"'{d}'")
            if d == n.name:
                problems.append(f"{file}: ops[{seen[n.name]}] ({n.name}).after: depends on "
                                f"itself")
    meta = raw.get("meta") or {}
    pipeline = None
    if not isinstance(meta, dict):
        problems.append(f"{file}: meta: expected a mapping")
        meta = {}
    else:
        meta = dict(meta)
        pipeline, bad = parse_pipeline(meta.pop(PIPELINE_KEY, None), len(nodes),
                                       f"{file}: meta.{PIPELINE_KEY}")
        problems += bad
    if problems:
        raise InputError(problems)
    graph = OpGraph(str(raw.get("name") or Path(file).stem), nodes, hw, meta, pipeline)
    if _is_acyclic(graph):
        return graph
    import networkx as nx
    cycle = nx.find_cycle(graph.dag())
    path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
    raise InputError(f"{file}: ops: dependency cycle {path} (after: and stream order must form "
                     f"a DAG)")


def _is_acyclic(graph: OpGraph) -> bool:
    """Kahn's algorithm over dependencies and stream order (linear time, no imports)."""
    preds: dict[str, set[str]] = {n.name: set(n.after) for n in graph.nodes}
    last: dict[str, str] = {}
    for n in graph.nodes:
        if n.stream in last:
            preds[n.name].add(last[n.stream])
        last[n.stream] = n.name
    succs: dict[str, list[str]] = {name: [] for name in preds}
    for name, ps in preds.items():
        for p in ps:
            succs[p].append(name)
    waiting = {name: len(ps) for name, ps in preds.items()}
    ready = [name for name, k in waiting.items() if k == 0]
    seen = 0
    while ready:
        name = ready.pop()
        seen += 1
        for s in succs[name]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    return seen == len(preds)


def load_graph(path: str | Path) -> OpGraph:
    """Read and validate a graph file."""
    return parse_graph(yamlio.load(path, "graph file"), str(path))
