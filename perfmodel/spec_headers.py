"""The identity lines at the top of a hardware spec (`name`, `architecture`,
`compute_capability`, `aliases`, `device_names`), read from the file's text without the YAML
parser, the spec loader or numpy.

Two readers use them: `perfmodel hw list`, which prints the built-in catalogue from these lines
alone (start-up is most of its time: a full load parses every spec and fitted.yaml), and
`perfmodel.hardware`'s name lookup, which loads only the file whose header names the GPU asked
for. Neither trusts them further: `hw show NAME` and every prediction parse and check the whole
spec (tests/test_hardware.py checks that the headers agree with the parsed specs).
"""
from __future__ import annotations

import re
from pathlib import Path

from perfmodel.shipped import shipped_dir

# a top-level `key: value` line of one of the identity keys, a trailing comment dropped
HEADER_LINE = re.compile(r"^(name|architecture|compute_capability|aliases|device_names):"
                         r"[ \t]*(.*?)[ \t]*(?:#.*)?$", re.M)
LIST_KEYS = ("aliases", "device_names")
NAME_KEYS = ("name", "aliases", "device_names")


def builtin_spec_dir() -> Path:
    """hwspecs/: inside the installed package (shipped as package data, see pyproject.toml), or
    at the repository root in a source checkout or editable install."""
    return shipped_dir("hwspecs", "hwspecs")


def builtin_spec_files() -> list[Path]:
    """The built-in spec files, sorted by file name."""
    return sorted(builtin_spec_dir().glob("*.yaml"))


def _scalar(value: str) -> str:
    return value.strip().strip("\"'")


def header_fields(text: str) -> dict[str, str | tuple[str, ...]]:
    """The identity keys a spec's text states on their own lines: strings, the two lists as
    tuples of their flow-list items (quotes stripped); a key the text lacks is absent."""
    out: dict[str, str | tuple[str, ...]] = {}
    for key, value in HEADER_LINE.findall(text):
        if key in out:
            continue  # the first line of a key is the top-level one
        value = value.strip()
        if key in LIST_KEYS:
            items = value[1:-1] if value.startswith("[") and value.endswith("]") else value
            out[key] = tuple(_scalar(v) for v in items.split(",") if v.strip())
        else:
            out[key] = _scalar(value)
    return out


def header_names(text: str) -> list[str]:
    """Every name a spec's header gives (its name, aliases and driver device names)."""
    f = header_fields(text)
    names: list[str] = []
    for key in NAME_KEYS:
        v = f.get(key)
        if isinstance(v, tuple):
            names += list(v)
        elif v:
            names.append(v)
    return names
