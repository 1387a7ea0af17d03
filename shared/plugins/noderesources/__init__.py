"""NodeResourcesFit and NodeResourcesBalancedAllocation: kube-scheduler's
pkg/scheduler/framework/plugins/noderesources."""
