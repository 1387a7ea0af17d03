"""NodeResourcesFit and NodeResourcesBalancedAllocation, in kube-scheduler's layout
(pkg/scheduler/framework/plugins/noderesources):

- fit.py: the NodeResourcesFit plugin and its Filter check (fitsRequest);
- balanced_allocation.py: the NodeResourcesBalancedAllocation plugin;
- resource_allocation.py: the scorer both plugins score with;
- least_allocated.py, most_allocated.py, requested_to_capacity_ratio.py: Fit's
  scoring strategies;
- args.py: NodeResourcesFitArgs and its validation;
- resources.py: which resources are accounted, and the reasons naming a lacking one;
- batch.py: the columnar (numpy) forms of Fit's Filter and of the scorers.
"""
