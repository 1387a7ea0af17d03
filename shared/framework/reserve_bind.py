"""Reserve, Permit and the binding cycle's PreBind, Bind and PostBind of a profile's
framework (framework/runtime): the extension points that run once a host is chosen.
Framework (runtime.py) gets them from this class."""

from __future__ import annotations

import time

from shared.framework.cycle_state import CycleState
from shared.framework.instrument import (
    BIND,
    PERMIT,
    POST_BIND,
    PRE_BIND,
    RESERVE,
    UNRESERVE,
    MetricsRecorder,
    always_success,
    observe_plugin,
    timed,
    timed_async,
)
from shared.framework.interface import (
    BindPlugin,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
)
from shared.framework.status import SUCCESS, Code, Status, plugin_error
from shared.framework.types import PodInfo
from shared.framework.waiting_pods import MAX_PERMIT_TIMEOUT


class ReserveBindRunner:
    """The plugins after selectHost, run in order as kube's framework runs them."""

    reserves: list[ReservePlugin]
    permits: list[PermitPlugin]
    pre_binds: list[PreBindPlugin]
    binds: list[BindPlugin]
    post_binds: list[PostBindPlugin]
    recorder: MetricsRecorder | None
    profile_name: str

    def plugin_recorder(self, state: CycleState) -> MetricsRecorder | None:
        """The recorder if this cycle records its plugins' durations."""
        return self.recorder if state.record_plugin_metrics else None

    @timed(RESERVE)
    def run_reserve_plugins_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        rec = self.plugin_recorder(state)
        for plugin in self.reserves:
            start = time.perf_counter() if rec is not None else 0.0
            status = plugin.reserve(state, pod, node)
            if rec is not None:
                observe_plugin(rec, RESERVE, plugin.name, status, start)
            if not status.ok:
                status.plugin = plugin.name
                return status
        return SUCCESS

    @timed(UNRESERVE, always_success)
    def run_reserve_plugins_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        rec = self.plugin_recorder(state)
        for plugin in reversed(self.reserves):  # undo in reverse order, as kube-scheduler
            start = time.perf_counter() if rec is not None else 0.0
            try:
                plugin.unreserve(state, pod, node)
            except Exception:  # Unreserve must reach every plugin
                continue
            if rec is not None:
                observe_plugin(rec, UNRESERVE, plugin.name, None, start)

    @timed(PERMIT)
    def run_permit_plugins(
        self, state: CycleState, pod: PodInfo, node: str
    ) -> tuple[Status, dict[str, float]]:
        """Success, a rejection (Unschedulable, with the plugin), or Wait with the
        timeout of each plugin that asked to wait (capped, as kube caps at maxTimeout)."""
        waits: dict[str, float] = {}
        rec = self.plugin_recorder(state)
        for plugin in self.permits:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                status, timeout = plugin.permit(state, pod, node)
            except Exception as err:
                return plugin_error(plugin.name, "Permit", err), {}
            if rec is not None:
                observe_plugin(rec, PERMIT, plugin.name, status, start)
            if status.code == Code.WAIT:
                waits[plugin.name] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
            elif not status.ok:
                status.plugin = plugin.name
                if not status.rejected:
                    status = Status(Code.ERROR, status.reasons, plugin=plugin.name)
                return status, {}
        if waits:
            return Status(Code.WAIT), waits
        return SUCCESS, {}

    # --- PreBind / Bind / PostBind (the binding cycle, run by the binder) ----------

    @timed_async(PRE_BIND)
    async def run_pre_bind_plugins(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        rec = self.plugin_recorder(state)
        for plugin in self.pre_binds:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                status = await plugin.pre_bind(state, pod, node)
            except Exception as err:
                return plugin_error(plugin.name, "PreBind", err)
            if rec is not None:
                observe_plugin(rec, PRE_BIND, plugin.name, status, start)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                status.plugin = plugin.name
                return status
        return SUCCESS

    @timed_async(BIND)
    async def run_bind_plugins(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The first Bind plugin that does not Skip binds the pod."""
        rec = self.plugin_recorder(state)
        for plugin in self.binds:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                status = await plugin.bind(state, pod, node)
            except Exception as err:
                return plugin_error(plugin.name, "Bind", err)
            if rec is not None:
                observe_plugin(rec, BIND, plugin.name, status, start)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                status.plugin = plugin.name
            return status
        return Status(Code.SKIP, ["no bind plugin bound the pod"])

    @timed_async(POST_BIND, always_success)
    async def run_post_bind_plugins(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational: a failing PostBind changes nothing about the binding."""
        rec = self.plugin_recorder(state)
        for plugin in self.post_binds:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                await plugin.post_bind(state, pod, node)
            except Exception:  # kube ignores PostBind outcomes too
                continue
            if rec is not None:
                observe_plugin(rec, POST_BIND, plugin.name, None, start)
