"""Run flags that plugins add to ``itbench evaluate`` and ``itbench validate``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class OptionError(ValueError):
    """A plugin flag on the command line is unknown, lacks its value or has a wrong one."""


@dataclass
class OptionSpec:
    """A registered run flag: ``--NAME VALUE`` sets the trial option ``KEY``.

    The flag is a friendlier spelling of ``--option KEY=VALUE``: the value reaches the domain
    in :attr:`itbench.domain.TrialContext.options` under :attr:`key`.

    Attributes:
        name: The flag without its dashes, e.g. ``policy-engine``.
        key: The trial option it sets, e.g. ``policy_engine``.
        help: One line for listings.
        choices: The allowed values; empty for any value.
        switch: The flag takes no value and sets its option to ``True`` (``--mcp``).
    """

    name: str
    key: str
    help: str = ""
    choices: tuple[str, ...] = ()
    switch: bool = False


def parse_flags(
    tokens: Sequence[str], specs: Mapping[str, OptionSpec]
) -> tuple[list[str], dict[str, Any]]:
    """Split command-line tokens into plain arguments and registered plugin flags.

    Args:
        tokens: Tokens the command did not recognize itself, in order.
        specs: Registered flags by name.

    Returns:
        The tokens that are not flags, and the trial options the flags set.

    Raises:
        OptionError: an unknown flag, a flag without a value, or a value not among its choices.
    """
    rest: list[str] = []
    options: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            rest.append(token)
            continue
        name, sep, value = token[2:].partition("=")
        spec = specs.get(name)
        if spec is None:
            known = ", ".join(f"--{n}" for n in sorted(specs)) or "none"
            raise OptionError(f"no such option: --{name} (flags from plugins: {known})")
        if spec.switch:
            if sep:
                raise OptionError(f"--{name} takes no value")
            options[spec.key] = True
            continue
        if not sep:
            if i >= len(tokens):
                raise OptionError(f"--{name} needs a value")
            value = tokens[i]
            i += 1
        if spec.choices and value not in spec.choices:
            raise OptionError(f"--{name}: {value!r} is not one of {', '.join(spec.choices)}")
        options[spec.key] = value
    return rest, options
