"""The ``itbench`` command line: the group, its commands and the console-script entry point."""

from __future__ import annotations

import sys

import click
from pydantic import ValidationError

from itbench import __version__, console
from itbench.cli.boards import compare, leaderboard
from itbench.cli.browse import list_cmd, plugins, show
from itbench.cli.common import EXIT_USAGE
from itbench.cli.new import new
from itbench.cli.outputs import docs, report, schema
from itbench.cli.run import cleanup, evaluate, validate
from itbench.cli.tool import tool


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="itbench")
def cli() -> None:
    """itbench: benchmark AI agents on real IT work (SRE, compliance, FinOps)."""


for _command in (
    list_cmd,
    show,
    evaluate,
    validate,
    report,
    compare,
    leaderboard,
    cleanup,
    plugins,
    schema,
    docs,
    new,
    tool,
):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    try:
        cli.main(prog_name="itbench", standalone_mode=True)
    except ValidationError as exc:  # a model rejected user input that click could not check
        err = exc.errors()[0]
        console.problem(f"invalid option {'.'.join(map(str, err['loc']))}: {err['msg']}")
        sys.exit(EXIT_USAGE)


__all__ = ["cli", "main"]
