"""Every Prometheus metric ksched exports, declared once: name, help and labels.

kube-scheduler's names and labels where one exists (scheduler_*, leader_election_*),
ksched's own (ksched_*) for what kube has no counterpart of. Each service builds the
metrics it serves into its own registry from these declarations, so that a metric two
services serve (ksched_assume_conflicts_total: the workers and the cache) has one
meaning and one set of labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from shared.runtime.histogram import LabelledHistogram


@dataclass(frozen=True)
class Metric:
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()  # histograms

    def counter(self, registry: CollectorRegistry) -> Counter:
        return Counter(self.name, self.help, self.labels, registry=registry)

    def gauge(self, registry: CollectorRegistry) -> Gauge:
        return Gauge(self.name, self.help, self.labels, registry=registry)

    def histogram(self, registry: CollectorRegistry) -> Histogram:
        return Histogram(self.name, self.help, self.labels, registry=registry, buckets=self.buckets)

    def cheap_histogram(self, registry: CollectorRegistry) -> LabelledHistogram:
        """For the scheduling cycle's hot path (histogram.py): one thread only."""
        return LabelledHistogram(self.name, self.help, self.labels, self.buckets, registry)


def _doubling(start: float, count: int) -> tuple[float, ...]:
    return tuple(start * 2**i for i in range(count))


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """kube's metrics.ExponentialBuckets: start, start*factor, ... (count of them),
    multiplied step by step as Go does, so that the `le` labels are the same floats."""
    buckets = [start]
    for _ in range(count - 1):
        buckets.append(buckets[-1] * factor)
    return tuple(buckets)


# --- every service (shared/runtime/service.py) ---------------------------------
LEADER_STATUS = Metric(
    "leader_election_master_status",
    "1 while this replica leads its service, else 0 (kube's metric)",
    ("name",),
)
PROGRESS_AGE = Metric(
    "ksched_progress_age_seconds",
    "Longest time without progress on work this process has (a unit of work in progress,"
    " a backlog, the event loop's heartbeat); stalled past KSCHED_STALL_SECONDS",
)
EVENT_LOOP_LAG = Metric(
    "ksched_event_loop_lag_seconds", "How late the event loop's last heartbeat ticked"
)

# --- watcher -----------------------------------------------------------------------
WATCHER_EVENTS = Metric("ksched_watcher_events_total", "Cluster events routed", ("kind", "type"))
REJECTED_EVENTS = Metric("ksched_rejected_events_total", "Events refused as malformed")
WATCHER_OTHER_SHARDS = Metric(
    "ksched_watcher_other_shards_events_total",
    "Cluster events acked unread: another watcher shard's (shared/sharding.py)",
)
WATCH_EVENT_WARNINGS = Metric(
    "ksched_watch_event_warnings_total",
    "Accepted events warned about for fields the Kubernetes API schema does not know"
    " (the API server's warning to a client without strict validation)",
    ("kind",),
)

# --- queue -------------------------------------------------------------------------
PENDING_PODS = Metric("scheduler_pending_pods", "Pending pods by sub-queue", ("queue",))
QUEUE_INCOMING_PODS = Metric(
    "scheduler_queue_incoming_pods_total",
    "Pods added to a scheduling queue, by the event that added them",
    ("queue", "event"),
)
QUEUE_LEASE_EXPIRED = Metric(
    "ksched_queue_lease_expired_total",
    "Attempts whose worker or binder stopped reporting (fenced, then requeued)",
)
QUEUE_INFLIGHT_EVENTS = Metric(
    "ksched_queue_inflight_events", "Cluster events remembered for pods in flight"
)
QUEUE_HINT_ERRORS = Metric(
    "ksched_queue_hint_errors_total", "Queueing hints that raised (counted as Queue)"
)
UNSCHEDULABLE_PODS = Metric(  # kube's: kept by the queue, per plugin of the last rejection
    "scheduler_unschedulable_pods",
    "The number of unschedulable pods broken down by plugin name. A pod will increment the"
    " gauge for all plugins that caused it to not schedule and so this metric have meaning"
    " only when broken down by plugin.",
    ("plugin", "profile"),
)

# --- queue, worker and binder: the framework's extension points (instrument.py) --------
FRAMEWORK_EXTENSION_POINT_DURATION = Metric(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.",
    ("extension_point", "status", "profile"),
    _exponential(0.0001, 2, 12),  # 0.1 ms .. ~200 ms, as kube's
)
PLUGIN_EXECUTION_DURATION = Metric(  # sampled: 10% of cycles, as kube's
    "scheduler_plugin_execution_duration_seconds",
    "Duration for running a plugin at a specific extension point.",
    ("plugin", "extension_point", "status"),
    _exponential(0.00001, 1.5, 20),  # 0.01 ms .. ~22 ms, as kube's
)

# --- worker and cache ------------------------------------------------------------
ASSUME_CONFLICTS = Metric(
    "ksched_assume_conflicts_total",
    "Assumes the cache refused at commit, by the refusing plugin",
    ("plugin",),
)

# --- worker ------------------------------------------------------------------------
SCHEDULE_ATTEMPTS = Metric(
    "scheduler_schedule_attempts_total", "Scheduling attempts by result", ("result", "profile")
)
SCHEDULING_ATTEMPT_DURATION = Metric(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency",
    ("result", "profile"),
    _doubling(0.001, 15),
)
POD_SCHEDULING_SLI_DURATION = Metric(  # kube's: from the pod's first pop to its success
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from its first attempt",
    ("attempts",),
    _doubling(0.01, 20),
)
POD_SCHEDULING_ATTEMPTS = Metric(
    "scheduler_pod_scheduling_attempts",
    "Number of attempts to successfully schedule a pod",
    buckets=(1, 2, 4, 8, 16),
)
# Opportunistic batching (KEP-5598), upstream's BatchAttemptStats and BatchCacheFlushed
BATCH_ATTEMPTS = Metric(
    "scheduler_batch_attempts_total",
    "Counts of results when we attempt to use batching.",
    ("profile", "result"),
)
BATCH_CACHE_FLUSHED = Metric(
    "scheduler_batch_cache_flushed_total",
    "Counts of cache flushes by reason.",
    ("profile", "reason"),
)
PREEMPTION_ATTEMPTS = Metric("scheduler_preemption_attempts_total", "Preemption attempts")
PREEMPTION_VICTIMS = Metric(
    "scheduler_preemption_victims",
    "Number of selected preemption victims",
    buckets=_doubling(1, 10),
)

# --- cache -------------------------------------------------------------------------
ASSUMED_PODS = Metric("ksched_assumed_pods_total", "Assumes committed")
EXPIRED_ASSUMED_PODS = Metric("ksched_expired_assumed_pods_total", "Assumed pods expired")
CACHE_NODES = Metric("ksched_cache_nodes", "Nodes in the cache")
CACHE_PODS = Metric("ksched_cache_pods", "Pods in the cache", ("state",))

# --- binder ------------------------------------------------------------------------
BINDS = Metric("ksched_binds_total", "Binding attempts by result", ("result",))
BIND_DEAD_LETTERS = Metric(
    "ksched_bind_dead_letters_total", "Bind requests dead-lettered", ("reason",)
)
BINDER_WAITING_PODS = Metric("ksched_binder_waiting_pods", "Pods waiting on Permit here")
