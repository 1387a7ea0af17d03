"""From a KubeSchedulerConfiguration profile to the plugins of each extension point.

Follows kube-scheduler v1: the default plugins are a MultiPoint set; a
profile's enabled/disabled sets merge into the defaults per extension point
(a re-enabled default keeps its place, '*' disables all defaults); MultiPoint
plugins then expand to every extension point they implement, except where an
extension point names the plugin itself (that entry wins) or disables it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.config import ConfigError, PluginRef, PluginSet, Profile
from shared.framework.handle import Handle
from shared.framework.interface import EXTENSION_POINTS, Plugin, ScorePlugin

PluginFactory = Callable[[dict[str, Any], Handle], Plugin]

# kube-scheduler's default MultiPoint plugins and score weights (v1), without the
# volume and dynamic-resource plugins, which ksched does not implement.
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)


@dataclass
class ProfilePlugins:
    """The instantiated plugins of one profile, per extension point, in order."""

    scheduler_name: str
    by_point: dict[str, list[Plugin]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    instances: dict[str, Plugin] = field(default_factory=dict)


def _merge(defaults: list[PluginRef], custom: PluginSet) -> list[PluginRef]:
    disabled = {p.name for p in custom.disabled}
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    merged = []
    for plugin in defaults:
        if "*" in disabled or plugin.name in disabled:
            continue
        if plugin.name in custom_by_name:  # re-configured default keeps its position
            index, plugin = custom_by_name[plugin.name]
            replaced.add(index)
        merged.append(plugin)
    merged += [p for i, p in enumerate(custom.enabled) if i not in replaced]
    return merged


def build_profile(
    profile: Profile, registry: Mapping[str, PluginFactory], handle: Handle
) -> ProfilePlugins:
    sets = _point_sets(profile)
    multipoint = _merge(
        [PluginRef(name=n, weight=w or None) for n, w in DEFAULT_PLUGINS], sets.pop("multiPoint")
    )
    args = _plugin_args(profile)
    needed = {p.name for p in multipoint} | {p.name for s in sets.values() for p in s.enabled}
    out = ProfilePlugins(profile.scheduler_name)
    for name in sorted(needed):
        factory = registry.get(name)
        if factory is None:
            raise ConfigError(f"profiles[{profile.scheduler_name}]: unknown plugin {name!r}")
        out.instances[name] = factory(args.pop(name, {}), handle)
    if args:
        raise ConfigError(
            f"profiles[{profile.scheduler_name}].pluginConfig: args for plugins that are not "
            f"enabled: {sorted(args)}"
        )
    for point, iface in EXTENSION_POINTS.items():
        out.by_point[point] = _expand(point, iface, sets[point], multipoint, out.instances)
    out.weights = _weights(multipoint, sets["score"], out.by_point["score"], profile)
    _validate(out)
    return out


def _point_sets(profile: Profile) -> dict[str, PluginSet]:
    plugins = profile.plugins
    sets: dict[str, PluginSet] = {"multiPoint": PluginSet()}
    # A copy: the profile is built again by each user of it (the queue: hints, sort, PreEnqueue).
    extra = dict(plugins.model_extra or {}) if plugins is not None else {}
    if plugins is not None:
        sets["multiPoint"] = plugins.multi_point
    for point in EXTENSION_POINTS:
        raw = extra.pop(point, None)
        sets[point] = PluginSet.model_validate(raw) if raw is not None else PluginSet()
    if extra:
        raise ConfigError(
            f"profiles[{profile.scheduler_name}].plugins: "
            f"unknown extension point(s) {sorted(extra)}"
        )
    return sets


def _plugin_args(profile: Profile) -> dict[str, dict[str, Any]]:
    args: dict[str, dict[str, Any]] = {}
    for pc in profile.plugin_config:
        if pc.name in args:
            raise ConfigError(f"pluginConfig: {pc.name} configured more than once")
        args[pc.name] = pc.args
    return args


def _expand(
    point: str,
    iface: type,
    explicit: PluginSet,
    multipoint: list[PluginRef],
    instances: dict[str, Plugin],
) -> list[Plugin]:
    disabled = {p.name for p in explicit.disabled}
    enabled = [p.name for p in explicit.enabled]
    for name in enabled:
        if not isinstance(instances[name], iface):
            raise ConfigError(f"plugin {name!r} does not implement extension point {point}")
    if "*" in disabled:
        return [instances[n] for n in enabled]
    overrides, from_multipoint = [], []
    for ref in multipoint:
        plugin = instances[ref.name]
        if not isinstance(plugin, iface) or ref.name in disabled:
            continue
        if ref.name in enabled:
            overrides.append(ref.name)
        elif ref.name in from_multipoint:
            raise ConfigError(f"plugin {ref.name!r} already registered as {point}")
        else:
            from_multipoint.append(ref.name)
    ordered = [n for n in enabled if n in overrides] + from_multipoint
    ordered += [n for n in enabled if n not in overrides]
    return [instances[n] for n in ordered]


def _weights(
    multipoint: list[PluginRef], score: PluginSet, scorers: list[Plugin], profile: Profile
) -> dict[str, int]:
    weights: dict[str, int] = {}
    for ref in [*score.enabled, *multipoint]:  # an explicit Score weight wins
        if ref.name in weights:
            continue
        if ref.weight is not None and ref.weight < 0:
            raise ConfigError(
                f"profiles[{profile.scheduler_name}].plugins: score weight of {ref.name} "
                f"must be non-negative, got {ref.weight}"
            )
        weights[ref.name] = ref.weight or 1  # as kube-scheduler: 0 means the default, 1
    return {p.name: weights.get(p.name, 1) for p in scorers if isinstance(p, ScorePlugin)}


def _validate(out: ProfilePlugins) -> None:
    where = f"profiles[{out.scheduler_name}]"
    if len(out.by_point["queueSort"]) != 1:
        raise ConfigError(f"{where}: exactly one queueSort plugin is required")
    if not out.by_point["bind"]:
        raise ConfigError(f"{where}: at least one bind plugin is required")
