"""Options shared between commands, each defined once here."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from itbench.bench import Bench
from itbench.cli.common import problems_reported
from itbench.models import Complexity
from itbench.options import OptionError, parse_flags

F = TypeVar("F", bound=Callable[..., Any])

#: Lets plugin-registered flags (``itbench_register_options``) through to :func:`plugin_flags`.
PLUGIN_FLAGS = {"ignore_unknown_options": True, "allow_extra_args": True}

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
plugin_option = click.option(
    "--plugin", "plugins", multiple=True, metavar="MODULE", help="Load a plugin module."
)
scenario_path_option = click.option(
    "--scenario-path",
    "scenario_paths",
    multiple=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="An extra scenario catalog directory.",
)
patterns_argument = click.argument("patterns", nargs=-1)


def plugin_options(fn: F) -> F:
    """Add ``--plugin`` and ``--scenario-path`` (passed on as ``plugins``, ``scenario_paths``)."""
    return plugin_option(scenario_path_option(fn))


def bench_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--plugin`` and ``--scenario-path`` and pass a loaded :class:`Bench` as ``bench``.

    However the command ends, the plugin problems it has not printed yet are printed last.
    """

    @plugin_options
    @wraps(fn)
    def wrapper(
        *args: Any, plugins: tuple[str, ...], scenario_paths: tuple[str, ...], **kwargs: Any
    ) -> Any:
        bench = Bench(plugins=plugins, scenario_paths=scenario_paths)
        with problems_reported(bench):
            return fn(*args, bench=bench, **kwargs)

    return wrapper


def selection_options(fn: F) -> F:
    """Add ``--domain``, ``--tag`` and ``--complexity`` (scenario selection beside patterns)."""
    fn = click.option(
        "--complexity",
        multiple=True,
        type=click.Choice([c.value for c in Complexity]),
        help="Only scenarios of these complexities.",
    )(fn)
    fn = click.option(
        "--tag", "tags", multiple=True, help="Only scenarios with every one of these tags."
    )(fn)
    return click.option("--domain", "domains", multiple=True, help="Only these domains.")(fn)


def run_options(fn: F) -> F:
    """Add the options of a run that ``evaluate`` and ``validate`` share.

    ``--workers``, ``--executor``, ``--sandbox``, ``--option KEY=VALUE`` (passed on as
    ``options``, parsed by :func:`parse_options`) and ``--out``.
    """
    fn = click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        help="Run directory (validate: one per agent under it).",
    )(fn)
    fn = click.option(
        "--option",
        "options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Trial option for the domain (VALUE parsed as JSON when it can be).",
    )(fn)
    fn = click.option(
        "--sandbox",
        type=click.Choice(["bwrap", "none"]),
        default="bwrap",
        show_default=True,
        help="Confine external agents (none: for debugging; results are labelled unsandboxed).",
    )(fn)
    fn = click.option("--executor", default="local", show_default=True, help="Executor name.")(fn)
    return click.option(
        "--workers",
        default=1,
        show_default=True,
        type=click.IntRange(min=1),
        help="Trials run at once.",
    )(fn)


def parse_options(values: tuple[str, ...]) -> dict[str, Any]:
    """Trial options from ``--option KEY=VALUE`` words (a VALUE that is not JSON is a string).

    Raises:
        click.BadParameter: a word is not ``KEY=VALUE``.
    """
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def plugin_flags(bench: Bench, tokens: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Plain arguments and the trial options set by plugin flags among ``tokens``.

    Raises:
        click.UsageError: a flag is unknown or its value is not allowed.
    """
    try:
        return parse_flags(tokens, bench.options)
    except OptionError as exc:
        raise click.UsageError(str(exc)) from None


run_dir_type = click.Path(file_okay=False, path_type=Path)
