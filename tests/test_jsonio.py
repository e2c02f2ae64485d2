"""perfmodel/jsonio.py: the one JSON reader — UTF-8, size and depth limits, finite numbers,
duplicate keys — with one-line errors naming the file."""
from __future__ import annotations

import json

import pytest

from perfmodel import jsonio
from perfmodel.errors import InputError


@pytest.mark.parametrize("text, says", [
    ("[" * 3000, "nested deeper than 100 levels at line 1, column 101"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1e400}', "number 1e400 is out of range"),
    ("1" * 5000, "an integer literal of more than 4,300 digits"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("{", "not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ("", "not JSON (Expecting value at line 1, column 1)"),
])
def test_refusals_are_one_line_naming_the_file(text, says):
    with pytest.raises(InputError) as e:
        jsonio.loads(text, "f.json")
    assert len(e.value.problems) == 1 and "\n" not in e.value.problems[0]
    assert e.value.problems[0].startswith("f.json: ") and says in e.value.problems[0]


def test_valid_documents_read_as_json_does():
    for doc in ({"a": [1, 2.5, None, True, "x"], "b": {"c": [[[]]]}}, [], "[[[", 10 ** 300,
                {"deep": [[[[[[[[1]]]]]]]] * 3}):
        text = json.dumps(doc)
        assert jsonio.loads(text) == json.loads(text)
    # brackets inside strings do not count towards the depth
    assert jsonio.loads(json.dumps({"s": "[" * 500})) == {"s": "[" * 500}
    assert jsonio.loads("[" * 100 + "]" * 100) == json.loads("[" * 100 + "]" * 100)


def test_files_go_through_the_utf8_check(tmp_path):
    p = tmp_path / "x.json"
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"x.json: not UTF-8 text \(byte 0xff at line 1"):
        jsonio.load(p)
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}')  # a byte-order mark is dropped
    assert jsonio.load(p) == {"a": 1}
    with pytest.raises(InputError, match="cannot read"):
        jsonio.load(tmp_path / "missing.json")
