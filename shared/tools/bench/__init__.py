"""The benchmarks: scheduler_perf's workloads and ksched's own measurements.

The harness: workloads (scheduler_perf's, as objects), runner (one workload end to
end against a fresh stack), perf (SchedulingThroughput as scheduler_perf computes
it), resources (CPU and RSS of the stack), report (tables, JSON, charts). The
commands, one module each: suite (`ksched bench`), baseline, cycle, queue, scale
(`ksched bench-<name>`) and refresh (the snapshot-refresh part of bench-scale).
"""
