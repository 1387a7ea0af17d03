"""InterPodAffinity, in kube-scheduler's layout
(pkg/scheduler/framework/plugins/interpodaffinity):

- plugin.py: the plugin, its args, its events and queueing hints;
- filtering.py: PreFilter's topology counts and Filter;
- scoring.py: PreScore's topology scores, Score and NormalizeScore;
- terms.py: a pod's parsed (anti-)affinity terms (framework.AffinityTerm);
- index.py: the existing pods' required anti-affinity, kept per node;
- batch.py: the columnar (numpy) forms of the counts, Filter and Score.
"""
