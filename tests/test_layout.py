"""The architecture, checked from the source: import direction, no private names across modules,
ops that only count work, and a package list that matches the tree (docs/design.md "Layout")."""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfmodel"

# Layers, lowest first: a module may import its own group and any lower layer, never a higher
# one nor a sibling group of the same layer (studies and validation stay independent).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),                        # errors units yamlio fitted hardware demand engine
    ("ops",),                         # ops count work
    ("schedule",),                    # graph contention schedule predict
    ("workloads",),                   # models, builder, recipes
    ("report",),                      # tables, progress, plots
    ("plan",),                        # memory, serving, training
    ("studies", "validation", "sol"),
    ("cli",),
)
SCHEDULE_MODULES = {"graph", "contention", "schedule", "predict", "batch"}
# top-level modules above the core: the design-space sweep builds model graphs and predicts them
# (and sizes their memory), a planner's layer
TOP_LEVEL_GROUPS = {"sweep": "plan"}
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}


def group_of(module: str) -> str:
    """Layer group of a dotted perfmodel module name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "init"
    if parts[1] in SCHEDULE_MODULES:
        return "schedule"
    if parts[1] in TOP_LEVEL_GROUPS:
        return TOP_LEVEL_GROUPS[parts[1]]
    if parts[1] in RANK:
        return parts[1]
    return "core"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) of every import, lazy ones included."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([target] if target else []))
            out.append((target, [a.name for a in node.names], node.lineno))
    return out


MODULES = modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    here = group_of(module)
    for target, names, line in imports(MODULES[module], module):
        top = target.split(".")[0]
        assert top not in ("validate", "tests", "benchmarks", "overlap"), \
            f"{module}:{line} imports {target}: perfmodel must stand alone"
        if top != "perfmodel" or here == "init":
            continue
        # `from perfmodel.x import y` where y is a submodule imports that submodule
        targets = [f"{target}.{n}" if f"{target}.{n}" in MODULES else target for n in names] \
            or [target]
        for t in targets:
            there = group_of(t)
            if there in ("init", here):
                assert there != "init" or here == "init", \
                    f"{module}:{line} imports the package root; import the defining module"
                continue
            assert RANK[there] < RANK[here], \
                f"{module}:{line} imports {t}: {here} may not depend on {there}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_of_other_modules(module):
    path = MODULES[module]
    for target, names, line in imports(path, module):
        if target.startswith("perfmodel") and target != module:
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{module}:{line} imports private {private} from {target}"
    # attribute access on an imported perfmodel module: mod._name
    tree = ast.parse(path.read_text())
    aliases = {a.asname or a.name.split(".")[-1]
               for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
               for a in node.names
               if (isinstance(node, ast.Import) and a.name.startswith("perfmodel"))
               or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perfmodel")
                   and f"{node.module}.{a.name}" in MODULES)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            pytest.fail(f"{module}:{node.lineno} uses private {node.value.id}.{node.attr}")


OPS = sorted(p for p in (PACKAGE / "ops").rglob("*.py"))


@pytest.mark.parametrize("path", OPS, ids=lambda p: str(p.relative_to(ROOT)))
def test_ops_only_count(path):
    """Ops describe work; the engine alone turns it into seconds and knows the architecture's
    name only through declared ISA capabilities."""
    text = path.read_text()
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    assert "architecture" not in re.sub(r'"""[\s\S]*?"""', "", code), \
        f"{path.name} branches on the architecture's name; use the spec's isa capabilities"
    for floor in ("latency_s", "kernel_launch_s", "time_s"):
        assert floor not in code, f"{path.name} handles seconds ({floor}); count work instead"
    for target, _, line in imports(path, ".".join(path.relative_to(ROOT).with_suffix("").parts)):
        assert target != "perfmodel.engine", f"{path.name}:{line} imports the engine"


def test_package_list_matches_the_tree():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    data = set(config.get("package-dir", {}))
    assert on_disk <= listed, f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"
    assert listed <= on_disk | data, f"listed but absent: {sorted(listed - on_disk - data)}"
    for pkg, folder in config["package-dir"].items():
        assert (ROOT / folder).is_dir(), f"{pkg} maps to missing folder {folder}"


def test_init_only_re_exports():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr, ast.Assign)), \
            f"perfmodel/__init__.py:{node.lineno} defines {type(node).__name__}; " \
            f"define it in its own module and re-export it"
