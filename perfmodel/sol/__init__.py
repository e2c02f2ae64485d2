"""Speed of light for kernel engineers, and SOL-ExecBench problems as input (docs/cli.md "sol").

  problems  definition.json / workload.jsonl and the workloads CSV → Workload
  mapping   Workload → op graph, with SOLAR's MACs and I/O bytes
  solar     SOLAR's convention (tensor-core MACs vs DRAM bytes) and its B200 arch file
  estimate  the speed of light two ways: SOLAR's convention and perfmodel's roofline and pipes
  score     SOL-ExecBench's SOL score
  coverage  which benchmark problems map, and a cross-check of the published bounds
"""
from perfmodel.sol.score import sol_score

__all__ = ["sol_score"]
