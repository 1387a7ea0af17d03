"""NodeResourcesFitArgs (v1): the types, kube-scheduler's defaults and validation
(apis/config/validation ValidateNodeResourcesFitArgs), and the resource list that
NodeResourcesBalancedAllocationArgs shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.framework.plugin_args import ArgsParser
from shared.plugins.noderesources.resources import CPU, MEMORY, is_qualified_name

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

MAX_RESOURCE_WEIGHT = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # the shape's score scale in the config


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int


@dataclass(frozen=True)
class UtilizationShapePoint:
    utilization: int
    score: int


@dataclass(frozen=True)
class ScoringStrategy:
    type: str
    resources: tuple[ResourceSpec, ...]
    shape: tuple[UtilizationShapePoint, ...] | None = None  # RequestedToCapacityRatio only


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    ignored_resources: frozenset[str]
    ignored_resource_groups: frozenset[str]
    scoring_strategy: ScoringStrategy


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def resource_specs(parser: ArgsParser, value: Any, path: str) -> tuple[ResourceSpec, ...]:
    """[]ResourceSpec with SetDefaults: none means cpu and memory, weight 0 means 1."""
    specs = []
    for i, raw in enumerate(parser.items(value, path)):
        item = parser.mapping(raw, f"{path}[{i}]", ("name", "weight"))
        name = parser.string(item.get("name"), f"{path}[{i}].name")
        weight = parser.integer(item.get("weight"), f"{path}[{i}].weight") or 1
        specs.append(ResourceSpec(name, weight))
    return tuple(specs) or DEFAULT_RESOURCES


def _validate_label_name(parser: ArgsParser, value: str, path: str) -> None:
    if not is_qualified_name(value):
        raise parser.error(
            path,
            f"Invalid value: {value!r}: name part must consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character, "
            "with an optional DNS subdomain prefix and '/'",
        )


def parse_ignored(parser: ArgsParser, args: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    resources = [
        parser.string(v, f"ignoredResources[{i}]")
        for i, v in enumerate(parser.items(args.get("ignoredResources"), "ignoredResources"))
    ]
    for i, name in enumerate(resources):
        _validate_label_name(parser, name, f"ignoredResources[{i}]")
    groups_raw = parser.items(args.get("ignoredResourceGroups"), "ignoredResourceGroups")
    groups = [parser.string(v, f"ignoredResourceGroups[{i}]") for i, v in enumerate(groups_raw)]
    for i, group in enumerate(groups):
        if "/" in group:
            raise parser.error(
                f"ignoredResourceGroups[{i}]",
                f"Invalid value: {group!r}: resource group name can't contain '/'",
            )
        _validate_label_name(parser, group, f"ignoredResourceGroups[{i}]")
    return resources, groups


def _validate_weights(parser: ArgsParser, resources: Sequence[ResourceSpec], path: str) -> None:
    for i, spec in enumerate(resources):
        if not 0 < spec.weight <= MAX_RESOURCE_WEIGHT:
            raise parser.error(
                f"{path}[{i}].weight",
                f"Invalid value: {spec.weight}: resource weight of {spec.name} "
                f"not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
            )


def _parse_shape(
    parser: ArgsParser, value: Any, path: str
) -> tuple[UtilizationShapePoint, ...] | None:
    """RequestedToCapacityRatioParam.shape, validated as validateFunctionShape."""
    if value is None:
        return None
    param = parser.mapping(value, path, ("shape",))
    shape_path = f"{path}.shape"
    points = []
    for i, raw in enumerate(parser.items(param.get("shape"), shape_path)):
        item = parser.mapping(raw, f"{shape_path}[{i}]", ("utilization", "score"))
        utilization = parser.integer(item.get("utilization"), f"{shape_path}[{i}].utilization")
        score = parser.integer(item.get("score"), f"{shape_path}[{i}].score")
        points.append(UtilizationShapePoint(utilization, score))
    _validate_function_shape(parser, points, shape_path)
    return tuple(points)


def _validate_function_shape(
    parser: ArgsParser, points: Sequence[UtilizationShapePoint], path: str
) -> None:
    if not points:
        raise parser.error(path, "Required value: at least one point must be specified")
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            value = points[i].utilization
            raise parser.error(
                f"{path}[{i}].utilization",
                f"Invalid value: {value}: values must be sorted in increasing order",
            )
    for i, point in enumerate(points):
        for name, value, top in (
            ("utilization", point.utilization, MAX_UTILIZATION),
            ("score", point.score, MAX_CUSTOM_PRIORITY_SCORE),
        ):
            if not 0 <= value <= top:
                raise parser.error(
                    f"{path}[{i}].{name}", f"Invalid value: {value}: not in valid range [0, {top}]"
                )


def parse_strategy(parser: ArgsParser, value: Any) -> ScoringStrategy:
    if value is None:  # SetDefaults_NodeResourcesFitArgs
        return ScoringStrategy(LEAST_ALLOCATED, DEFAULT_RESOURCES)
    path = "scoringStrategy"
    raw = parser.mapping(value, path, ("type", "resources", "requestedToCapacityRatio"))
    strategy_type = parser.string(raw.get("type"), f"{path}.type")
    if strategy_type not in SCORING_STRATEGY_TYPES:
        raise parser.error(f"{path}.type", "must be one of " + ", ".join(SCORING_STRATEGY_TYPES))
    resources = resource_specs(parser, raw.get("resources"), f"{path}.resources")
    _validate_weights(parser, resources, f"{path}.resources")
    ratio_path = f"{path}.requestedToCapacityRatio"
    shape = _parse_shape(parser, raw.get("requestedToCapacityRatio"), ratio_path)
    if strategy_type == REQUESTED_TO_CAPACITY_RATIO and shape is None:
        # kube-scheduler would dereference a nil pointer here; refuse the config instead.
        raise parser.error(ratio_path, f"Required value: for type {REQUESTED_TO_CAPACITY_RATIO}")
    return ScoringStrategy(strategy_type, resources, shape)
