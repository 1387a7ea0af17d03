"""Permit, after the assume: kube-scheduler's RunPermitPlugins, with a second look for
pods told to wait (a gang whose last members two lanes committed at once)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from services.worker.attempt import Attempt
from shared.framework.handle import HandleProviders
from shared.framework.runtime import Framework
from shared.framework.status import Code
from shared.runtime.permits import send_permit_signals
from shared.runtime.service import Runtime
from shared.snapshot import Snapshot

log = logging.getLogger("ksched.worker")


class PermitPhase:
    def __init__(
        self,
        rt: Runtime,
        snapshot: Snapshot,
        frameworks: Sequence[Framework],
        providers: HandleProviders,
    ) -> None:
        self.rt = rt
        self.snapshot = snapshot
        self.frameworks = frameworks
        self.providers = providers
        # Coscheduling reads the pod groups the cache tracks; other profiles skip the read.
        self.needs_pod_groups = any("Coscheduling" in fw.plugins.instances for fw in frameworks)

    async def refresh_pod_groups(self) -> None:
        if not self.needs_pod_groups:
            return
        try:
            groups = await self.snapshot.pod_groups(self.rt.redis)
        except Exception as err:
            log.warning("pod groups not refreshed: %s", err)
            return
        self.providers.pod_groups = groups

    def run(
        self, committed: list[Attempt]
    ) -> tuple[list[Attempt], list[tuple[Attempt, Exception]]]:
        """Permit after assume. A pod told to Wait goes to a binder all the same, which
        holds it (WaitOnPermit) with its resources assumed."""
        allowed: list[Attempt] = []
        rejected: list[tuple[Attempt, Exception]] = []
        uncommitted = self.snapshot.uncommitted()
        for a in committed:
            if not a.framework.permits:  # the default profile: no plugin reads the view
                # Still run (and timed) as kube runs it for every pod: Success.
                a.framework.run_permit_plugins(a.state, a.pod, a.node)
                allowed.append(a)
                continue
            self._view(a, uncommitted)
            status, waits = a.framework.run_permit_plugins(a.state, a.pod, a.node)
            if status.ok or status.code == Code.WAIT:
                a.waits = waits
                allowed.append(a)
                continue
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            rejected.append((a, a.rejection(status)))
        return allowed, rejected

    async def send_signals(self) -> None:
        await send_permit_signals(self.rt.nc, self.frameworks)

    async def second_look(self, waiting: list[Attempt]) -> None:
        """Run Permit again for the pods that were told to wait, on a snapshot refreshed
        after their commit. kube-scheduler runs Permit once, serially; here two lanes
        (or workers) may commit the last members of a gang at the same time, each
        without seeing the other's, and both wait. The later commit's second look sees
        both and allows the gang (its Wait verdict is dropped: the pod already waits)."""
        if not waiting:
            return
        await self.snapshot.refresh()
        uncommitted = self.snapshot.uncommitted()
        for a in waiting:
            self._view(a, uncommitted)
            a.framework.run_permit_plugins(a.state, a.pod, a.node)
        await self.send_signals()

    def _view(self, a: Attempt, uncommitted: frozenset[str]) -> None:
        """Permit reads what the cache holds: the snapshot, less the other lanes'
        assumptions whose commit is still out (one may be refused, and a gang counted
        with it would be allowed short of minMember)."""
        a.framework.set_snapshot(self.snapshot.cluster())
        self.providers.uncommitted = uncommitted
