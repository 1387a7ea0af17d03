"""Arguments as kubectl takes them (pure): flags anywhere among the positionals
(`get pods -n NS NAME`, `get -n NS pods NAME`), repeated `-f`, and one-line
`error: ...` messages with exit code 1 instead of argparse's usage dump."""

from __future__ import annotations

import argparse
import os
from typing import Any, NoReturn

DEFAULT_NATS = "nats://127.0.0.1:4222"
OUTPUTS = ("wide", "json", "yaml", "name")
JSONPATH = "jsonpath="


class KschedParser(argparse.ArgumentParser):
    """argparse with kubectl's habits: optionals and positionals intermixed, and a
    usage error is one line on stderr and exit code 1 (kubectl's)."""

    _parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_known_intermixed_args calls back into parse_known_args (3.11, 3.12):
        # the flag keeps those calls plain. A parser with sub-commands cannot intermix.
        if self._parsing or self._subparsers is not None:
            return super().parse_known_args(args, namespace)
        self._parsing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: -"):
            message = "unknown flag: " + message.removeprefix("unrecognized arguments: ")
        self.exit(1, f"error: {message}\n")


def output_format(value: str) -> str:
    """-o: wide, json, yaml, name, or jsonpath=TEMPLATE (kubectl also takes
    `jsonpath='...'`, quotes left by a shell)."""
    if value in ("", *OUTPUTS):  # "": the table
        return value
    if value.startswith(JSONPATH) and len(value) > len(JSONPATH):
        template = value[len(JSONPATH) :]
        if len(template) > 1 and template[0] == template[-1] and template[0] in "'\"":
            template = template[1:-1]
        return JSONPATH + template
    raise argparse.ArgumentTypeError(
        f'unable to match a printer suitable for the output format "{value}", allowed formats '
        "are: json,jsonpath,name,wide,yaml"
    )


def nats_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nats",
        default=os.environ.get("KSCHED_NATS_URL", DEFAULT_NATS),
        help="NATS server(s), comma separated (env KSCHED_NATS_URL)",
    )


def namespace_flag(p: argparse.ArgumentParser, all_namespaces: bool = False) -> None:
    p.add_argument("-n", "--namespace", default=None, help="the namespace (default: default)")
    if all_namespaces:
        p.add_argument("-A", "--all-namespaces", action="store_true")


def selector_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-l", "--selector", default="", help="label selector: a=b, a!=b, a in (x,y), !a, ..."
    )
    p.add_argument(
        "--field-selector",
        default="",
        help="spec.nodeName=N, status.phase=Pending, metadata.name!=x, ... (comma is AND)",
    )


def seconds_flag(p: argparse.ArgumentParser, flag: str, text: str) -> None:
    p.add_argument(flag, type=float, default=None, metavar="SECONDS", help=text)


def files_flag(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=required,
        default=[],
        help="a file, a directory, or - (repeat for several, applied in order)",
    )


def selecting_verb(sub: Any, verb: str, text: str, nargs: str) -> argparse.ArgumentParser:
    """A verb that takes `TYPE [NAME...]`, -l, --field-selector, -n and -A."""
    p: argparse.ArgumentParser = sub.add_parser(verb, help=text)
    p.add_argument("args", nargs=nargs, metavar="TYPE [NAME ...]")
    selector_flags(p)
    namespace_flag(p, all_namespaces=True)
    nats_flag(p)
    return p


def add_kubectl_verbs(sub: Any) -> None:
    """kubectl's verbs against a running ksched (kubectl.py, get.py, top.py)."""
    for verb, text in (
        ("apply", "publish Pods, Nodes and workloads from manifests"),
        ("create", "create objects from manifests (generateName; AlreadyExists if present)"),
    ):
        p = sub.add_parser(verb, help=text)
        files_flag(p, required=True)
        namespace_flag(p)
        nats_flag(p)

    delete = selecting_verb(
        sub, "delete", "delete pods or nodes by name, -f, --all or -l (publishes DELETED)", "*"
    )
    files_flag(delete, required=False)
    delete.add_argument("--all", action="store_true", help="every object of the type")

    get = selecting_verb(sub, "get", "list pods, nodes or events as kubectl does", "+")
    get.add_argument(
        "-o", "--output", type=output_format, default="", help="wide|json|yaml|name|jsonpath=..."
    )
    get.add_argument("-w", "--watch", action="store_true", help="then print each change")
    get.add_argument("--show-labels", action="store_true", help="a LABELS column")
    get.add_argument(
        "--request-timeout", type=float, default=0, help="stop watching after this many seconds"
    )

    describe = sub.add_parser("describe", help="a pod or node in detail, with scheduling reasons")
    describe.add_argument("args", nargs="+", metavar="TYPE NAME")
    describe.add_argument(
        "--config",
        default=os.environ.get("KSCHED_CONFIG"),
        help="KubeSchedulerConfiguration for the per-node reasons (env KSCHED_CONFIG)",
    )
    namespace_flag(describe)
    nats_flag(describe)

    top = sub.add_parser("top", help="live view: queues, pods/s, p99, conflicts, nodes, health")
    seconds_flag(top, "--interval", "seconds between frames (2); with --once, the pods/s window")
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.add_argument("--nodes", type=int, default=20, help="node rows shown")
    nats_flag(top)

    status = sub.add_parser("status", help="every service instance (nats.micro discovery)")
    seconds_flag(status, "--wait", "seconds to collect answers (default: until they stop)")
    nats_flag(status)


def add_whatif_arguments(p: argparse.ArgumentParser) -> None:
    """`ksched whatif` (whatif.py): a running worker answers."""
    files_flag(p, required=True)
    p.add_argument(
        "--config", help="a KubeSchedulerConfiguration to use instead of the running one"
    )
    p.add_argument("--node", help="that node's full detail: every plugin's verdict and scores")
    p.add_argument("--top", type=int, default=10, help="best-scoring nodes listed (10)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    namespace_flag(p)
    nats_flag(p)


def add_ui_arguments(p: argparse.ArgumentParser) -> None:
    """`ksched ui` (shared/tools/ui/app.py): the page over a running ksched."""
    p.add_argument("--port", type=int, default=8080, help="port to serve on (0: pick a free one)")
    p.add_argument("--listen", default="127.0.0.1", help="address to bind (127.0.0.1)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name browsers may reach the page by (addresses and localhost always)",
    )
    p.add_argument("--config", help="the KubeSchedulerConfiguration that explains a pod's verdicts")
    nats_flag(p)


def add_shadow_arguments(p: argparse.ArgumentParser) -> None:
    """`ksched shadow` (shadow.py): the cluster stream replayed through a configuration."""
    p.add_argument("--config", required=True, help="the candidate KubeSchedulerConfiguration")
    p.add_argument("--since", help="compare the decisions from this stream sequence or ISO time")
    p.add_argument("--follow", action="store_true", help="then print new differences as they come")
    p.add_argument(
        "--diverge", action="store_true", help="replay the candidate's placements, not reality's"
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    nats_flag(p)


def command_of(argv: list[str]) -> str:
    """The verb: the first word that is not a flag ("" for none)."""
    return next((a for a in argv if not a.startswith("-")), "")
