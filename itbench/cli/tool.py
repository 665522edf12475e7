"""``itbench tool``: the client of a running trial's tools (for external agents)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from itbench import console
from itbench.cli.common import EXIT_FAILED


@click.group()
def tool() -> None:
    """Call a running trial's tools (for agents that are external processes).

    Reads ITBENCH_TOOLS_URL and ITBENCH_TOOLS_TOKEN, which the `command` agent sets.
    """


def _client() -> Any:
    from itbench.toolclient import ToolClient, UsageProblem

    try:
        return ToolClient.from_env(os.environ)
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None


def _answer(fn: Callable[[Any], Any]) -> Any:
    from itbench.toolclient import ToolClientError

    try:
        return fn(_client())
    except ToolClientError as exc:
        console.problem(str(exc))
        sys.exit(EXIT_FAILED)


@tool.command("list")
def tool_list() -> None:
    """Print the tools (name, description, JSON-schema parameters) as JSON."""
    console.print_json(_answer(lambda c: c.tools()))


@tool.command("task")
def tool_task() -> None:
    """Print the task view as JSON."""
    console.print_json(_answer(lambda c: c.task()))


@tool.command("call")
@click.argument("name")
@click.argument("arguments", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args-json", help="All arguments as one JSON object instead.")
def tool_call(name: str, arguments: tuple[str, ...], args_json: str | None) -> None:
    """Call tool NAME and print the result as JSON.

    Each VALUE is parsed by the type of its parameter in the tool's schema: integers,
    numbers and booleans as such, arrays and objects as JSON, strings verbatim (even when
    they look like numbers). Exits 1 with the reason on stderr when a value does not fit its
    parameter or the call fails.
    """
    from itbench.toolclient import UsageProblem, split_arguments

    try:
        values, extra = split_arguments(arguments, args_json)
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    console.print_json(_answer(lambda c: c.call_words(name, values, extra)))
