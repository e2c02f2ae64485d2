"""`perfmodel build`: a built graph file predicts exactly as the model built in place."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main


H100 = "H100-SXM"


def test_build_round_trips_through_predict(tmp_path, capsys):
    out = tmp_path / "g.yaml"
    args = ["llama3-8b", "--phase", "train", "--batch", "2", "--seq", "1024", "--tp", "2",
            "--dp", "2", "--dtype", "fp8"]
    assert main(["build", *args, "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--hw", H100, "--format", "json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["predict", *args, "--hw", H100, "--format", "json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert from_file["total_time_s"] == pytest.approx(direct["total_time_s"], rel=1e-12)
    assert len(from_file["ops"]) == len(direct["ops"])
