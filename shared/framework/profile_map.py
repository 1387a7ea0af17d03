"""A service's profiles: one framework per schedulerName, built once (kube-scheduler's
profile.Map). Every service that runs plugins holds one; the queue derives its sort,
its queueing hints and its PreEnqueue from the same frameworks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from shared.api.podstatus import scheduler_name
from shared.config import SchedulerConfiguration
from shared.framework.handle import Handle, HandleProviders
from shared.framework.profile import PluginFactory
from shared.framework.runtime import Framework


class ProfileMap(Mapping[str, Framework]):
    """Built from the configuration, the plugin registry and the service's providers,
    which every profile's Handle reads."""

    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Mapping[str, PluginFactory],
        providers: HandleProviders | None = None,
    ) -> None:
        self.providers = providers or HandleProviders()
        self._by_name = {
            p.scheduler_name: Framework.from_profile(p, registry, Handle(providers=self.providers))
            for p in config.profiles
        }

    def __getitem__(self, name: str) -> Framework:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def for_pod(self, raw_pod: dict[str, Any]) -> Framework | None:
        """The framework of the pod's profile (spec.schedulerName); None if no profile
        serves it."""
        return self._by_name.get(scheduler_name(raw_pod))
