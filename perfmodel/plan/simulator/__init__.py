"""A serving simulator of one replica: continuous batching with paged KV, chunked prefill,
preemption, CUDA graphs and pipeline micro-batches, step by step, with every step priced by the
op models (`cost.StepCost`).

  cost.py      StepCost: the time of one engine step, from the builder's graphs
  engines.py   Engine (scheduler settings) and the presets of vLLM, SGLang, TensorRT-LLM
  workload.py  Workload: request lengths and arrivals (offline, Poisson rate, concurrency)
  kv.py        kv_budget: the KV blocks one GPU's memory leaves; KV bytes per token by kv_dtype
  interp.py    the lazily filled interpolation tables StepCost reads
  sim.py       simulate(...): the continuous-batching loop
  result.py    SimResult: TTFT, TPOT, ITL, E2E, throughput, preemptions, KV use
  disagg.py    simulate_disaggregated(...): a prefill pool and a decode pool, the KV moved
  layout.py    Layout: one replica's tp/ep/pp and the replicas (a disaggregated Pool is one)

```python
from perfmodel.plan.simulator import Workload, simulate
r = simulate("llama3-70b", "H200", Workload("offline", requests=1000, isl=1024, osl=1024),
             engine="vllm", tp=8, dtype="fp8")
r.output_tokens_per_s, r.summary()["ttft_s"]["p50"], r.preemptions
```
"""
from perfmodel.plan.simulator.cost import StepCost
from perfmodel.plan.simulator.disagg import DisaggResult, Pool, simulate_disaggregated
from perfmodel.plan.simulator.kv import KvBudget, kv_budget
from perfmodel.plan.simulator.engines import ENGINES, Engine, engine_preset
from perfmodel.plan.simulator.result import SimResult
from perfmodel.plan.simulator.sim import simulate
from perfmodel.plan.simulator.workload import Lengths, Workload

__all__ = ["DisaggResult", "ENGINES", "Engine", "KvBudget", "Lengths", "Pool", "SimResult",
           "StepCost", "Workload", "engine_preset", "kv_budget", "simulate",
           "simulate_disaggregated"]
