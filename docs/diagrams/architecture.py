"""Draws docs/architecture.svg: `python docs/diagrams/architecture.py` (matplotlib).

Boxes are services, streams and Redis key groups; arrows carry the subject and the
step of a pod's life (numbers match docs/architecture.md). The SVG keeps its text as
text (a small file git can diff) and carries no date, so drawing it again changes
nothing unless the picture did."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["svg.hashsalt"] = "ksched"
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

SERVICE, STREAM, STORE, USER = "#cfe3ff", "#ffe9b3", "#f7c8c8", "#d9f2d0"
BOXES = {
    # name: (x, y, w, h, colour, text)
    "user": (0.2, 7.6, 3.0, 1.3, USER, "users, kubectl-like CLI\n`ksched apply/get/top`"),
    "cluster": (4.4, 7.6, 4.4, 1.3, STREAM, "JetStream KSCHED_CLUSTER\nksched.cluster.{nodes,pods,pdbs}.…\n(latest event per subject)"),
    "events": (13.5, 0.3, 3.1, 1.6, STREAM, "KSCHED_EVENTS\nksched.events.<ns>.<pod>\nKSCHED_ERRORS\nksched.errors.…"),
    "watcher": (4.9, 5.3, 3.4, 1.1, SERVICE, "watcher ×1\ninformers + event handlers"),
    "queue": (0.5, 3.0, 3.4, 1.3, SERVICE, "queue ×1\nactiveQ / backoffQ /\nunschedulablePods, nominator"),
    "cache": (9.3, 3.0, 3.6, 1.3, SERVICE, "cache ×1\nNodeInfo, assumed pods,\nvalidate-then-commit"),
    "worker": (4.9, 2.9, 3.4, 1.4, SERVICE, "worker ×N\nPreFilter → Filter → PostFilter\n→ Score → select → assume"),
    "bind": (4.9, 0.9, 3.4, 1.0, STREAM, "JetStream KSCHED_BIND\nksched.internal.bind (work queue)"),
    "binder": (9.3, 0.9, 3.6, 1.0, SERVICE, "binder ×N\nWaitOnPermit → PreBind → Bind"),
    "redisq": (0.5, 0.6, 3.4, 1.4, STORE, "Redis\nksched:queue:pods\nksched:queue:meta"),
    "redisc": (13.4, 2.6, 3.0, 2.1, STORE, "Redis\nksched:cache:nodes, :pods,\n:nodeinfo, :generations,\n:generation"),
    "micro": (10.2, 7.5, 3.4, 1.5, USER, "every instance: nats.micro\n`ksched-<service>`\n$SRV.PING/INFO/STATS\nreadyz, metrics"),
}
ARROWS = [
    # (from, to, label, rad)
    ("user", "cluster", "① ADDED Pod / Node", 0.0),
    ("cluster", "watcher", "② durable consumer `watcher`", 0.0),
    ("watcher", "queue", "③ queue.events", 0.15),
    ("watcher", "cache", "② cache.events", -0.15),
    ("queue", "worker", "④ queue.pop (batch)", 0.0),
    ("worker", "cache", "⑤ cache.assume", 0.0),
    ("worker", "bind", "⑥ BindRequest", 0.0),
    ("bind", "binder", "⑦ durable `binder`", 0.0),
    ("binder", "cluster", "⑧ MODIFIED pod: nodeName,\nPodScheduled=True\n(expected last seq)", 0.45),
    ("binder", "events", "Scheduled", 0.0),
    ("worker", "events", "FailedScheduling,\nPreempted", 0.45),
    ("worker", "queue", "queue.report", 0.25),
    ("queue", "redisq", "write-through", 0.0),
    ("cache", "redisc", "write-through", 0.0),
    ("redisc", "worker", "snapshot delta (Lua)", 0.25),
    ("cluster", "user", "watch (get -w, top)", 0.3),
]


def centre(name: str) -> tuple[float, float]:
    x, y, w, h, *_ = BOXES[name]
    return x + w / 2, y + h / 2


def main(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(17, 9.6))
    ax.set_xlim(0, 16.7)
    ax.set_ylim(0, 9.3)
    ax.axis("off")
    patches = {}
    for name, (x, y, w, h, colour, text) in BOXES.items():
        box = FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=colour, ec="#444")
        ax.add_patch(box)
        patches[name] = box
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9.5)
    for src, dst, label, rad in ARROWS:
        arrow = FancyArrowPatch(
            centre(src), centre(dst), patchA=patches[src], patchB=patches[dst],
            arrowstyle="-|>", mutation_scale=14, color="#333",
            connectionstyle=f"arc3,rad={rad}", lw=1.2,
        )
        ax.add_patch(arrow)
        (x1, y1), (x2, y2) = centre(src), centre(dst)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        ax.text(mx + rad * (y2 - y1) * 0.5, my - rad * (x2 - x1) * 0.5, label, fontsize=8.3,
                ha="center", va="center", color="#0b3d91",
                bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
    ax.set_title("ksched: services, subjects, Redis keys and the life of a pod (① … ⑧)", fontsize=13)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})


if __name__ == "__main__":
    main(Path(__file__).resolve().parents[1] / "architecture.svg")
