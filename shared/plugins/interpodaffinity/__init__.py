"""InterPodAffinity: kube-scheduler's pkg/scheduler/framework/plugins/interpodaffinity."""
