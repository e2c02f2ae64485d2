"""Concurrent kernels: the contention model and the dropout RNG–GEMM overlap study.

The contention model (summed demand on shared resources, DESIGN.md "Overlap and contention")
and the dropout schedules arrive with the graph-scheduler and RNG–GEMM overlap issues; the
package is installed now so their imports are stable.
"""
