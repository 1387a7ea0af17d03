"""`ksched bench`: scheduler_perf's workloads run end to end against the services."""
