"""The ``itbench`` command line: the group, one module per command, the console-script entry point."""

from __future__ import annotations

import sys

import click
from pydantic import ValidationError

from itbench import __version__, console
from itbench.cli.cleanup import cleanup as cleanup_command
from itbench.cli.common import EXIT_USAGE
from itbench.cli.compare import compare as compare_command
from itbench.cli.docs import docs as docs_command
from itbench.cli.evaluate import evaluate as evaluate_command
from itbench.cli.export import export as export_command
from itbench.cli.leaderboard import leaderboard as leaderboard_command
from itbench.cli.list import list_cmd as list_command
from itbench.cli.mcp import mcp as mcp_command
from itbench.cli.new import new as new_command
from itbench.cli.plugins import plugins as plugins_command
from itbench.cli.report import report as report_command
from itbench.cli.schema import schema as schema_command
from itbench.cli.show import show as show_command
from itbench.cli.tool import tool as tool_command
from itbench.cli.trajectory import trajectory as trajectory_command
from itbench.cli.validate import validate as validate_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="itbench")
def cli() -> None:
    """itbench: benchmark AI agents on real IT work (SRE, compliance, FinOps)."""


# Each command is imported under another name: the package's attribute of the same name
# stays the command's module.
for _command in (
    list_command,
    show_command,
    evaluate_command,
    validate_command,
    report_command,
    compare_command,
    leaderboard_command,
    cleanup_command,
    plugins_command,
    schema_command,
    docs_command,
    new_command,
    tool_command,
    trajectory_command,
    export_command,
    mcp_command,
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
