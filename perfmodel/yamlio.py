"""Reading input files: one reader (bytes → UTF-8 check → YAML) for specs, graphs, models and
the other text inputs, YAML 1.2 floats, and one-line errors with line numbers.

Every input file goes through `read_text` (bytes, then a strict UTF-8 decode whose error names
the file, line and column). YAML documents are then composed into a node graph and checked
before anything is built from them (docs/cli.md "Exit codes"):
  * a key written twice in one mapping is refused (the last one silently won before);
  * aliases may not expand the document beyond MAX_EXPANDED_NODES nodes (an "alias bomb": 25
    levels of nested aliases in 700 bytes expand to 2^25 nodes), nor refer to themselves;
  * nesting deeper than MAX_DEPTH levels is refused (no input format nests more than a few).
A YAML syntax error is reported on one line, with its line and column.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from perfmodel.errors import InputError


# libyaml's C parser when PyYAML was built with it (~10x faster: loading the seven hardware
# specs is most of a fresh process's first prediction); the pure-Python one otherwise
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Nodes a document may hold once its aliases are expanded. The largest files perfmodel reads
# (a DeepSeek-V3 training graph written by `perfmodel build`) hold ~10^5 nodes; aliases beyond
# this are an expansion bomb, not data.
MAX_EXPANDED_NODES = 1_000_000
# Nesting depth of mappings and sequences (the formats nest at most ~6 levels)
MAX_DEPTH = 100
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(_SafeBase):
    """SafeLoader that reads `1.98e9` as a float (YAML 1.2), as every spec file writes it."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def one_line(text: Any) -> str:
    """`text` with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())


def decode(data: bytes, file: str) -> str:
    """UTF-8 text of `data` (a leading byte-order mark dropped), or an InputError naming the
    file, line and column of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{file}: not UTF-8 text (byte 0x{data[e.start]:02x} at line {line}, "
                         f"column {e.start - start + 1}); expected a UTF-8 text file") from None


def is_file(path: str | Path) -> bool:
    """Whether `path` names an existing file; False, not an error, for a string no file system
    takes as a path (too long, a NUL byte): a name, such as a GPU's, may be tested as a path."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of an input file, or an InputError naming it: cannot be read (missing, a
    directory, no permission), not UTF-8, or (a `.gz` file) not gzip data."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"{p}: cannot read {what} ({e.strerror or e})") from None
    if p.suffix == ".gz":
        import gzip
        import zlib
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{p}: not gzip data ({e}); expected a gzip-compressed {what}") \
                from None
    return decode(data, str(p))


def _mark(mark) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _check_nodes(root: yaml.Node, file: str) -> None:
    """Refuse duplicate keys, self-referencing aliases, too deep nesting and alias expansion
    beyond MAX_EXPANDED_NODES (module docstring). Iterative, and linear in the distinct nodes:
    an alias's expanded size is counted once per node, not once per reference."""
    size: dict[int, int] = {}          # expanded node count below (and with) each node
    active: set[int] = set()           # nodes on the current path (a cycle refers back to one)
    distinct = 0
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            active.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            continue
        if key in size:
            continue
        if key in active:
            raise InputError(f"{file}: an alias refers to the node that contains it"
                             f"{_mark(node.start_mark)} (recursive structures are not accepted)")
        if depth > MAX_DEPTH:
            raise InputError(f"{file}: nested deeper than {MAX_DEPTH} levels"
                             f"{_mark(node.start_mark)}")
        distinct += 1
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, file)
        active.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)
    total = size[id(root)]
    if total > MAX_EXPANDED_NODES and total > distinct:
        raise InputError(f"{file}: aliases expand the document to {total:,} nodes (at most "
                         f"{MAX_EXPANDED_NODES:,}; {distinct:,} written): refusing an alias "
                         f"expansion bomb")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_duplicate_keys(node: yaml.MappingNode, file: str) -> None:
    seen: dict[tuple[str, str], Any] = {}
    for k, _ in node.value:
        if not isinstance(k, yaml.ScalarNode) or k.tag == _MERGE_TAG:
            continue
        first = seen.setdefault((k.tag, k.value), k.start_mark)
        if first is not k.start_mark:
            raise InputError(f"{file}: duplicate key '{one_line(k.value)[:80]}'"
                             f"{_mark(k.start_mark)} (first at line {first.line + 1}); each key "
                             f"may appear once in a mapping")


def loads(text: str, file: str = "<string>") -> Any:
    """Parse YAML text (module docstring: checked nodes, one-line errors naming `file`)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, file)
        return loader.construct_document(node)
    except yaml.reader.ReaderError as e:
        # a character YAML does not allow (NUL, other control characters)
        pos = min(max(int(getattr(e, "position", 0) or 0), 0), len(text))
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        char = e.character if isinstance(e.character, int) else ord(str(e.character)[:1] or "?")
        raise InputError(f"{file}: not YAML text: character #x{char:04x} at line {line}, "
                         f"column {column} ({one_line(e.reason)})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or e
        raise InputError(f"{file}: malformed YAML{_mark(mark)}: {one_line(problem)}") from None
    except RecursionError:
        raise InputError(f"{file}: nested too deeply to read") from None
    finally:
        loader.dispose()


def load(path: str | Path, what: str = "file") -> Any:
    """Read and parse a YAML input file (`read_text`, then `loads`)."""
    return loads(read_text(path, what), str(Path(path)))


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
