"""The in-tree plugin registry: plugin name -> factory `new(args, handle)`.

One module per plugin; each exports NAME and `new`. Modules load on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from shared.framework.profile import PluginFactory

MODULES: dict[str, str] = {
    "PrioritySort": "prioritysort",
    "SchedulingGates": "schedulinggates",
    "NodeUnschedulable": "nodeunschedulable",
    "NodeName": "nodename",
    "TaintToleration": "tainttoleration",
    "NodeAffinity": "nodeaffinity",
    "NodePorts": "nodeports",
    "NodeResourcesFit": "noderesources.fit",
    "NodeResourcesBalancedAllocation": "noderesources.balanced_allocation",
    "ImageLocality": "imagelocality",
    "InterPodAffinity": "interpodaffinity.plugin",
    "PodTopologySpread": "podtopologyspread.plugin",
    "DefaultBinder": "defaultbinder",
    "DefaultPreemption": "defaultpreemption",
    "Coscheduling": "coscheduling",
    "GangScheduling": "gangscheduling",
}


class _Registry(Mapping[str, PluginFactory]):
    def __getitem__(self, name: str) -> PluginFactory:
        module = importlib.import_module(f"shared.plugins.{MODULES[name]}")
        factory: PluginFactory = module.new
        return factory

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


REGISTRY: Mapping[str, PluginFactory] = _Registry()
