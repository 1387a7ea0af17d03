"""`ksched`: the command-line entry point."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ksched", description="kube-scheduler as microservices")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run servers and services locally and schedule a demo")
    demo.add_argument("--nodes", type=int, default=50)
    demo.add_argument("--pods", type=int, default=500)
    demo.add_argument("--workers", type=int, default=2)
    demo.add_argument("--binders", type=int, default=2)
    demo.add_argument("--workdir", default=".ksched-run")
    demo.add_argument("--exit", action="store_true", help="stop after the summary")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from shared.cli.demo import run_demo

        return run_demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
