"""The GPU side of validation: microkernels (kernels/), the run script (run_gpu.sh), the PyTorch
benchmarks (torch_bench.py) and the collector of a run's results (collect.py). The comparison with
predictions lives in perfmodel.validation."""
