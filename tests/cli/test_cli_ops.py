"""`perfmodel ops`: every op with its parameters' units."""
from __future__ import annotations

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ops_lists_every_op_with_units(capsys):
    code, out, _ = run(capsys, "ops")
    assert code == 0
    for name in ("gemm", "attention", "elementwise", "norm", "softmax", "rng", "quantize", "moe",
                 "allreduce", "allgather", "reduce_scatter", "alltoall", "memcpy"):
        assert f"\n{name}  (" in "\n" + out
    assert "[rows]" in out
