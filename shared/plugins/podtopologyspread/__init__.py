"""PodTopologySpread: kube-scheduler's pkg/scheduler/framework/plugins/podtopologyspread."""
