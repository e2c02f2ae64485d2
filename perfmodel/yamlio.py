"""YAML reading shared by specs, graphs and models: YAML 1.2 floats, errors with line numbers."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from perfmodel.errors import InputError


# libyaml's C parser when PyYAML was built with it (~10x faster: loading the seven hardware
# specs is most of a fresh process's first prediction); the pure-Python one otherwise
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def loads(text: str, file: str = "<string>") -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        loc = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"{file}: malformed YAML{loc}: {getattr(e, 'problem', None) or e}") \
            from None


def load(path: str | Path, what: str = "file") -> Any:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"{p}: cannot read {what} ({e.strerror})") from None
    return loads(text, str(p))


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
