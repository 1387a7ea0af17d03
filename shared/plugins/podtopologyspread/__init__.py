"""PodTopologySpread, in kube-scheduler's layout
(pkg/scheduler/framework/plugins/podtopologyspread):

- plugin.py: the plugin, its args (default constraints), events and queueing hints;
- common.py: a constraint with its selector resolved, and what counts where;
- filtering.py: PreFilter's domain counts and critical paths, Filter;
- scoring.py: PreScore's domains and weights, Score and NormalizeScore;
- batch.py: the columnar (numpy) forms of the counts, Filter and Score.
"""
