"""ImageLocality: favours nodes that already have the pod's container images, weighing
each image by its size and by how widely it has spread across the cluster.
kube-scheduler's pkg/scheduler/framework/plugins/imagelocality/image_locality.go.

Implements: ScorePlugin.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from shared.api.models import Container
from shared.framework.columns import IntArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import (
    MAX_NODE_SCORE,
    BatchScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import arg_error
from shared.framework.signature import resources_fragment
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Status
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo

NAME = "ImageLocality"

# Bounds of the image score range: a reasonable size range for compressed images
# (90%ile of images on Docker Hub), the upper one per container.
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB

DEFAULT_IMAGE_TAG = "latest"


def normalized_image_name(name: str) -> str:
    """The name as the runtime reports it: without a tag or digest, ':latest' is implied."""
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:{DEFAULT_IMAGE_TAG}"
    return name


def scaled_image_score(state: ImageStateSummary, total_num_nodes: int) -> int:
    """The image's size scaled by its spread, to damp piling pods onto a few nodes."""
    spread = float(state.num_nodes) / float(total_num_nodes)
    return int(float(state.size) * spread)


def sum_image_scores(node: NodeInfo, containers: Iterable[Container], total_num_nodes: int) -> int:
    total = 0
    for container in containers:
        state = node.image_states.get(normalized_image_name(container.image))
        if state is not None:
            total += scaled_image_score(state, total_num_nodes)
    return total


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """MaxNodeScore scaled by where the clamped sum lies between the thresholds."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    # The numerator is never negative, so floor division is Go's truncation; with no
    # containers the clamp leaves it 0.
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def calculate_priorities(sum_scores: IntArray, num_containers: int) -> IntArray:
    """calculate_priority over an array; needs at least one container."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.clip(sum_scores, MIN_THRESHOLD, max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality(ScorePlugin, BatchScorePlugin, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [resources_fragment(pod)]  # the images are the containers'

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._counted: tuple[ClusterSnapshot, int] | None = None

    def _total_num_nodes(self) -> int:
        # Counted once per snapshot: Score runs for every node of the cycle.
        snapshot = self.handle.snapshot
        if self._counted is None or self._counted[0] is not snapshot:
            self._counted = (snapshot, len(snapshot.nodes))
        return self._counted[1]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        total_num_nodes = self._total_num_nodes()
        spec = pod.pod.spec
        containers = [*spec.init_containers, *spec.containers]
        score = calculate_priority(
            sum_image_scores(node, containers, total_num_nodes), len(containers)
        )
        return score, SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        total_num_nodes = self._total_num_nodes()
        spec = pod.pod.spec
        containers = [*spec.init_containers, *spec.containers]
        if not containers or total_num_nodes == 0:
            return None
        sums = np.zeros(len(rows), dtype=np.int64)
        for container in containers:
            image = nodes.image(normalized_image_name(container.image))
            # The snapshot counts nodes having the image among all nodes.
            having = np.count_nonzero(image.present)
            if having:  # else it adds 0 everywhere
                spread = float(having) / float(total_num_nodes)
                sums += (image.size[rows].astype(np.float64) * spread).astype(np.int64)
        if not sums.any():  # no image anywhere: the clamp makes every score 0
            return sums
        return calculate_priorities(sums, len(containers))

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: dict[str, Any], handle: Handle) -> ImageLocality:
    # ImageLocality has no args type: any field is unknown.
    for key in args or {}:
        raise arg_error(NAME, key, "unknown field")
    return ImageLocality(handle)
