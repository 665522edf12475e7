"""The run's options: every ``--option KEY=VALUE`` key is declared, with its flag and check.

Whoever reads an option declares it (``itbench_register_options``): the core its agents',
sandbox bounds' and runner's, each domain and agent plugin its own. A run is refused before its
first trial when a key is declared by nobody or a value fails its check.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Checks one option value: returns the value to use, or raises ValueError saying why not.
Check = Callable[[Any], Any]


class OptionError(ValueError):
    """An option or flag is unknown, lacks its value or has a wrong one (the message says which)."""


@dataclass
class OptionSpec:
    """A declared run option ``KEY``, usually with a flag ``--NAME VALUE`` setting it.

    The flag is a friendlier spelling of ``--option KEY=VALUE``: the value reaches the domain
    in :attr:`itbench.domain.TrialContext.options` under :attr:`key`.

    Attributes:
        name: The flag without its dashes, e.g. ``policy-engine`` (for an option without a
            flag, conventionally its key).
        key: The trial option it sets, e.g. ``policy_engine``.
        help: One line for listings.
        choices: The allowed values; empty for any value.
        switch: The flag takes no value and sets its option to ``True`` (``--mcp``).
        check: Checks a value (a number from the command line arrives as one, any other word
            as a string): returns the value to keep or raises ValueError with the reason;
            see :func:`check_number`, :func:`check_integer`, :func:`check_text`. None accepts any value.
        flag: Whether ``--NAME`` exists; without one the option is set by
            ``--option KEY=VALUE`` only.
    """

    name: str
    key: str
    help: str = ""
    choices: tuple[str, ...] = ()
    switch: bool = False
    check: Check | None = None
    flag: bool = True

    def checked(self, value: Any) -> Any:
        """``value`` as the run keeps it.

        Raises:
            OptionError: the value is not allowed (naming the option and why).
        """
        if self.switch and not isinstance(value, bool):
            raise OptionError(f"option {self.key}: {value!r} is not true or false")
        if self.choices and str(value) not in self.choices:
            raise OptionError(
                f"option {self.key}: {value!r} is not one of {', '.join(self.choices)}"
            )
        if self.check is None:
            return value
        try:
            return self.check(value)
        except (TypeError, ValueError) as exc:
            reason = str(exc).removeprefix(f"option {self.key}: ")
            raise OptionError(f"option {self.key}: {reason}") from None


def check_number(low: float, high: float) -> Check:
    """A check: a number from ``low`` to ``high``."""

    def check(value: Any) -> float:
        got = _parsed(value, float)
        if got is None or not math.isfinite(got) or not low <= got <= high:
            raise ValueError(f"{value!r} is not a number from {low:g} to {high:g}")
        return got

    return check


def check_integer(low: int, high: int) -> Check:
    """A check: a whole number from ``low`` to ``high``."""

    def check(value: Any) -> int:
        got = _parsed(value, int)
        if got is None or not low <= got <= high:
            raise ValueError(f"{value!r} is not a whole number from {low} to {high}")
        return int(got)

    return check


def _parsed(value: Any, kind: type[int] | type[float]) -> int | float | None:
    """``value`` as a ``kind`` (a flag's value arrives as a string), or None."""
    if isinstance(value, str):
        try:
            value = kind(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if kind is int and (not math.isfinite(value) or value != int(value)):
        return None
    return kind(value)


def check_text(value: Any) -> str:
    """A check: a string that is not blank."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not a non-empty string")
    return value


def checked_values(options: Mapping[str, Any], specs: Iterable[OptionSpec]) -> dict[str, Any]:
    """``options`` with the value of each key ``specs`` declare checked (the rest as given).

    Raises:
        OptionError: a declared value is not allowed.
    """
    out = dict(options)
    for spec in specs:
        if out.get(spec.key) is not None:
            out[spec.key] = spec.checked(out[spec.key])
    return out


def check_options(options: Mapping[str, Any], specs: Iterable[OptionSpec]) -> dict[str, Any]:
    """The run's options, each checked by the spec declaring its key.

    Raises:
        OptionError: a key nobody declares (the declared ones listed), or a wrong value.
    """
    by_key = {s.key: s for s in specs}
    out: dict[str, Any] = {}
    for key, value in options.items():
        spec = by_key.get(key)
        if spec is None:
            near = difflib.get_close_matches(key, list(by_key), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise OptionError(
                f"unknown option {key} ({hint}the options: {', '.join(sorted(by_key))}; "
                "see `itbench plugins`)"
            )
        out[key] = spec.checked(value)
    return out


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
        if spec is None or not spec.flag:
            known = ", ".join(f"--{n}" for n in sorted(specs) if specs[n].flag) or "none"
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
