"""CycleState: data plugins share within one scheduling cycle, under typed keys."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class StateKey(Generic[T]):
    """A key whose value type the type checker knows: `state.read(PRE_FILTER_KEY)`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # Whether this cycle records its plugins' durations (kube's
        # ShouldRecordPluginMetrics; Framework.new_cycle_state samples it).
        self.record_plugin_metrics = False

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T | None:
        return self._data.get(key.name)

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key.name, None)

    def clone(self) -> CycleState:
        """A copy for dry runs (preemption); values that mutate implement clone()."""
        copy = CycleState()
        copy._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        copy.record_plugin_metrics = self.record_plugin_metrics
        return copy
