"""Speed of the numerics emulator per format (a benchmark, not a test).

    python benchmarks/numerics_speed.py [n_elements]      (default 64M = 8192 × 8192)

Quantize→dequantize of an N(0,1) float32 matrix, one call per format, on one core (numpy is
single-threaded here except the RHT's small BLAS matmul). Target: 64M elements
through nvfp4 with 1D scaling in a few seconds. The time includes the report's error sums.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from perfmodel.studies.numerics.quantizers import quantize, report_table
from perfmodel.report.tables import format_table

VARIANTS = [("nvfp4", {}), ("nvfp4", {"scaling": "2d"}), ("nvfp4", {"sr": True}),
            ("nvfp4", {"rht": True}), ("mxfp4", {}), ("mxfp8", {}), ("fp8", {}),
            ("fp8_block", {}), ("fp8_block", {"block": (128, 128)}), ("bf16", {})]


def main() -> None:
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1 << 26
    cols = 8192 if n >= 8192 * 128 else 1024
    rows = max(1, n // cols)
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    table, reports = [], []
    for name, opts in VARIANTS:
        start = time.perf_counter()
        res = quantize(x, name, **opts)
        dt = time.perf_counter() - start
        reports.append(res.report)
        table.append([res.report["format"], f"{dt:.2f}", f"{x.size / dt / 1e6:.1f}",
                      f"{res.report['snr_db']:.2f}"])
    print(f"{rows} x {cols} = {x.size / 2**20:.0f}M float32 elements, N(0,1)")
    print(format_table(["format", "seconds", "Melem/s", "SNR dB"], table))
    print()
    print(report_table(reports))


if __name__ == "__main__":
    main()
