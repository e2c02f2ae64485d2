"""perfmodel/plan/arguments.py: the planners' arguments checked at their entry, one line per
problem naming the parameter, the value and the expectation (issue 42)."""
from __future__ import annotations

import math

import pytest

from perfmodel.errors import InputError
from perfmodel.plan.arguments import check_arguments
from perfmodel.plan.frameworks import framework
from perfmodel.plan.search import search_serving
from perfmodel.plan.serving import plan_serving, sweep_serving
from perfmodel.plan.simulator import Workload
from perfmodel.plan.training import plan_training, search_training_plans


@pytest.mark.parametrize("kw, says", [
    (dict(prompt="8"), "prompt: expected a positive integer, got '8'"),
    (dict(pp="2"), "pp: expected a positive integer, got '2'"),
    (dict(output=0), "output: expected a positive integer, got 0"),
    (dict(prompt=-1), "prompt: expected a positive integer, got -1"),
    (dict(prompt=math.inf), "prompt: expected a positive integer, got inf"),
    (dict(output=10 ** 400), "output: expected an integer <= 2^40 (a larger tensor exceeds any "
                             "GPU's memory), got 1.000e+400"),
    (dict(ttft_slo_s=10 ** 400), "ttft_slo_s: expected a positive duration in seconds, got "
                                 "1.000e+400"),
    (dict(ttft_slo_s=-1), "ttft_slo_s: expected a positive duration in seconds, got -1"),
    (dict(tpot_slo_s=math.nan), "tpot_slo_s: expected a positive duration in seconds, got nan"),
    (dict(batches=[2 ** 40]), "batches: expected an integer <= 2^20"),
    (dict(batches=[-1]), "batches: expected a positive integer, got -1 (in [-1])"),
    (dict(batches=[0]), "batches: expected a positive integer, got 0"),
    (dict(batches=5), "batches: expected a non-empty list of positive batch sizes, got 5"),
    (dict(batches=iter([1])), "batches: expected a non-empty list"),
    (dict(dtype=["bf16"]), "dtype: expected one of bf16, fp16, fp8, mxfp8, nvfp4, got ['bf16']"),
    (dict(kv_occupancy=1.5), "kv_occupancy: expected a number in (0, 1]"),
    (dict(progress="yes"), "progress: expected true or false (a bool), got 'yes'"),
    (dict(hw=None), "hw: expected a GPU name, spec file path or Hardware, got None"),
])
def test_plan_serving_names_the_parameter(kw, says):
    args = dict(model="llama3-8b", hw="H100-SXM", batches=[1]) | kw
    with pytest.raises(InputError) as e:
        plan_serving(**args)
    assert e.value.problems == [says] or e.value.problems[0].startswith(says), e.value.problems


def test_every_problem_is_reported_at_once():
    with pytest.raises(InputError) as e:
        plan_training("llama3-8b", "H100-SXM", batch="8", seq=0, pp="2", zero=7,
                      framework=["megatron"])
    assert [p.split(":")[0] for p in e.value.problems] == ["batch", "seq", "pp", "zero",
                                                           "framework"]


def test_the_other_entries():
    with pytest.raises(InputError, match="^gpus: expected a positive integer, got None$"):
        search_serving("llama3-8b", "H100-SXM", None, jobs=1)
    with pytest.raises(InputError, match=r"^engine: expected one of vllm.*got \['vllm'\]$"):
        search_serving("llama3-8b", "H100-SXM", 1, engine=["vllm"], jobs=1)
    with pytest.raises(InputError, match="^workload: mode 'trace' replays fixed arrival"):
        search_serving("llama3-8b", "H100-SXM", 1,
                       Workload("trace", pairs=[(8, 4)], arrivals=[0.0]), jobs=1)
    with pytest.raises(InputError, match="^gpus: expected a positive integer, got None$"):
        search_training_plans("llama3-8b", "H100-SXM", None, 8)
    with pytest.raises(InputError, match=r"^framework: expected one of megatron, pytorch, composer, got "
                                         r"\['x'\]$"):
        framework(["x"])
    with pytest.raises(InputError, match="^tp: expected a positive integer, got '2'$"):
        sweep_serving("llama3-8b", ["H100-SXM"], ["2"])  # not skipped as a bad combination


def test_none_is_allowed_where_the_default_is_none():
    def f(a: int = 1, tp: int | None = None, ttft_slo_s: float | None = None):
        check_arguments(f, locals())
    f(tp=None, ttft_slo_s=None)
    f(1, 2, 0.5)
    with pytest.raises(InputError, match="^tp: "):
        f(tp=0)
    def g(tp: int = 1):
        check_arguments(g, locals())
    with pytest.raises(InputError, match="^tp: expected a positive integer, got None$"):
        g(None)
