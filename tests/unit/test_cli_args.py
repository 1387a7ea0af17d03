"""kubectl's argument habits: flags anywhere, repeated -f, -o forms, one-line errors
with exit code 1, --version; and main() never ends in a traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from shared.runtime.discovery import version
from shared.tools.cli import main as cli
from shared.tools.cli.main import build_parser, main


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv[0]).parse_args(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "pods", "-n", "team", "web"],
        ["get", "-n", "team", "pods", "web"],
        ["get", "pods", "web", "-n", "team"],
        ["get", "--namespace=team", "pods", "web"],
    ],
)
def test_flags_anywhere(argv: list[str]) -> None:
    args = parse(*argv)
    assert (args.args, args.namespace) == (["pods", "web"], "team")


def test_repeated_files_in_order_and_selectors() -> None:
    args = parse("apply", "-f", "a.yaml", "-n", "x", "--filename", "b.yaml", "-f", "-")
    assert (args.filename, args.namespace) == (["a.yaml", "b.yaml", "-"], "x")
    args = parse("delete", "pods", "-l", "app in (a,b)", "--field-selector", "spec.nodeName=")
    assert (args.args, args.selector, args.field_selector) == (
        ["pods"],
        "app in (a,b)",
        "spec.nodeName=",
    )
    assert parse("delete", "--all", "pods", "-A").all is True
    assert parse("get", "pods", "--show-labels", "-A").show_labels is True


@pytest.mark.parametrize(
    ("value", "output"),
    [
        ("wide", "wide"),
        ("jsonpath={.metadata.name}", "jsonpath={.metadata.name}"),
        ("jsonpath='{.items[*].metadata.name}'", "jsonpath={.items[*].metadata.name}"),
    ],
)
def test_output_formats(value: str, output: str) -> None:
    assert parse("get", "pods", "-o", value).output == output


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["get", "pods", "--bogus"], "error: unknown flag: --bogus"),
        (
            ["get", "pods", "-o", "table"],
            "error: argument -o/--output: unable to match a printer suitable for the output "
            'format "table", allowed formats are: json,jsonpath,name,wide,yaml',
        ),
        (["apply"], "error: the following arguments are required: -f/--filename"),
        (["frobnicate"], "error: argument command: invalid choice: 'frobnicate'"),
    ],
)
def test_bad_flags_are_one_line_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_version_from_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ksched {version()}\n"


def test_an_unexpected_failure_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("something broke")

    monkeypatch.setattr(cli, "dispatch", broken)
    assert main(["get", "pods"]) == 1
    assert capsys.readouterr().err == "error: something broke\n"


HEAVY = ("pydantic", "numpy", "yaml", "redis", "prometheus_client", "shared.tools.bench")
PROBE = """
import sys
{code}
print(sorted(m for m in sys.modules if m.split(".")[0] in {heavy} or m.startswith({heavy})))
"""


@pytest.mark.parametrize(
    "code",
    [
        # parsing any verb but `bench`
        "from shared.tools.cli.main import build_parser\n"
        "build_parser('get').parse_args(['get', 'pods'])",
        # what `get`, `delete NAME` and `status` import before they talk to NATS
        "import shared.tools.cli.kubectl, shared.tools.cli.get, shared.tools.cli.top",
        # `whatif` of a Pod: the worker does the work (yaml only for a YAML file)
        "import shared.tools.cli.whatif as w\n"
        "from shared.tools.cli.manifests import Manifest\n"
        "pod = Manifest({'kind': 'Pod', 'metadata': {'name': 'p'}}, '-', '')\n"
        "w.request_of([pod], None, None, 5)",
    ],
)
def test_the_cli_starts_without_the_heavy_modules(code: str) -> None:
    """Start time is part of the interface (no timing here: what is imported)."""
    probe = PROBE.format(code=code, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
