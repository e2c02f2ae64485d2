"""Start-up: `import perfmodel` and `perfmodel hw list` import only what they use (perfmodel.lazy,
the CLI's one command module, one spec file per canonical name). What is imported is checked, not
how long it takes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import perfmodel as pm

ROOT = Path(__file__).resolve().parents[1]


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                          "print(json.dumps(sorted(sys.modules)))"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.splitlines()[-1]
    return set(json.loads(out))


def test_import_perfmodel_imports_no_model():
    loaded = _modules_after("import perfmodel")
    assert "numpy" not in loaded and "perfmodel.ops" not in loaded and "yaml" not in loaded


def test_hw_list_needs_neither_numpy_nor_the_ops():
    loaded = _modules_after("from perfmodel.cli.main import main\n"
                            "import contextlib, io\n"
                            "with contextlib.redirect_stdout(io.StringIO()):\n"
                            "    main(['hw', 'list'])")
    assert "perfmodel.spec_headers" in loaded
    # the listing reads the specs' identity lines: no spec is parsed, no YAML imported
    assert not {"numpy", "scipy", "yaml", "perfmodel.hardware", "perfmodel.ops",
                "perfmodel.plan"} & loaded


def test_a_canonical_name_loads_its_spec_alone():
    """H100-SXM is a file name: no other spec is read (the catalogue is not built) until an
    alias is asked for, and then the object is the catalogue's."""
    subprocess.run([sys.executable, "-c", (
        "import sys, perfmodel as pm\n"
        "hw = pm.hardware('H100-SXM')\n"
        "h = sys.modules['perfmodel.hardware']\n"
        "assert h.builtin_catalogue.cache_info().currsize == 0\n"
        "assert pm.hardware('h100') is hw is h.builtin_catalogue()['H100-SXM']\n")],
        check=True, cwd=ROOT)


def test_an_alias_or_device_name_loads_its_spec_alone():
    """H200 and the driver's device name are in H200-SXM.yaml's header lines: that file alone is
    parsed (the catalogue is not built); a name no header holds still builds the catalogue to
    say which exist."""
    subprocess.run([sys.executable, "-c", (
        "import sys, perfmodel as pm\n"
        "hw = pm.hardware('H200')\n"
        "h = sys.modules['perfmodel.hardware']\n"
        "assert hw.name == 'H200-SXM'\n"
        "assert pm.hardware('NVIDIA H200 141GB HBM3e') is hw\n"
        "assert h.builtin_catalogue.cache_info().currsize == 0\n"
        "assert h._builtin_spec.cache_info().currsize == 1\n"
        "try:\n"
        "    pm.hardware('H900')\n"
        "except pm.InputError as e:\n"
        "    assert 'H200-SXM' in str(e)\n"
        "assert h.builtin_catalogue.cache_info().currsize == 1\n")],
        check=True, cwd=ROOT)


def test_header_names_read_flow_lists_and_comments():
    from perfmodel.spec_headers import header_fields, header_names
    text = ("schema: 1\nname: X-1  # the chip\narchitecture: hopper\n"
            "compute_capability: \"9.0\"\naliases: [x1, 'x-one']\n"
            "device_names: [\"NVIDIA X1\"]\nclocks:\n  name: not-top-level\n")
    assert header_names(text) == ["X-1", "x1", "x-one", "NVIDIA X1"]
    assert header_fields(text) == {"name": "X-1", "architecture": "hopper",
                                   "compute_capability": "9.0", "aliases": ("x1", "x-one"),
                                   "device_names": ("NVIDIA X1",)}


def test_names_resolve_to_the_catalogue_objects():
    for hw in pm.list_hardware():
        assert pm.hardware(hw.name) is hw
        for alias in hw.aliases:
            assert pm.hardware(alias) is hw


def test_public_names_are_the_functions_not_their_modules():
    import importlib
    importlib.import_module("perfmodel.predict")
    importlib.import_module("perfmodel.hardware")
    assert callable(pm.predict) and callable(pm.hardware)
    assert pm.predict.__module__ == "perfmodel.predict"
    assert pm.engine.__name__ == "perfmodel.engine"  # submodules resolve as attributes
    assert set(pm.__all__) <= set(dir(pm))
    for name in pm.__all__:
        assert getattr(pm, name) is not None
