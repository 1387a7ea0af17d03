"""Pods nominated to nodes (kube's nominator): pending pods that preemption made room
for, which lower- or equal-priority pods must treat as already on the node
(RunFilterPluginsWithNominatedPods). Pure bookkeeping by pod key."""

from __future__ import annotations

from collections.abc import Iterator


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, None]] = {}  # node -> pod keys, in nomination order
        self._node_of: dict[str, str] = {}
        self.version = 0  # bumped on every change, so readers refresh only when needed

    def __len__(self) -> int:
        return len(self._node_of)

    def node_of(self, key: str) -> str:
        return self._node_of.get(key, "")

    def set(self, key: str, node: str) -> None:
        """Nominate the pod to `node`; the empty name clears its nomination."""
        if self._node_of.get(key, "") == node:
            return
        self._drop(key)
        if node:
            self._node_of[key] = node
            self._by_node.setdefault(node, {})[key] = None
        self.version += 1

    def delete(self, key: str) -> None:
        if self._drop(key):
            self.version += 1

    def _drop(self, key: str) -> bool:
        node = self._node_of.pop(key, None)
        if node is None:
            return False
        keys = self._by_node[node]
        del keys[key]
        if not keys:
            del self._by_node[node]
        return True

    def pods_for(self, node: str) -> list[str]:
        return list(self._by_node.get(node, ()))

    def items(self) -> Iterator[tuple[str, str]]:
        """(pod key, node) for every nomination, grouped by node."""
        for node, keys in self._by_node.items():
            for key in keys:
                yield key, node

    def clear(self) -> None:
        self._by_node.clear()
        self._node_of.clear()
        self.version += 1
