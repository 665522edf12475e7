"""What an organization parameter of a Linux host check is (see :mod:`.linuxparams`).

:mod:`.linuxkinds` and :mod:`.linuxlists` define one :class:`Kind` per check;
:mod:`.linuxparams` draws a trial's values of them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from itbench_ciso.checks import linux
from itbench_ciso.checks.linux_host import Mutation


@dataclass(frozen=True)
class Param:
    """One value of a kind.

    Attributes:
        label: What it is (a noun phrase).
        keys: Key names a baseline may use for it (lower case; upper case in a shell file).
        is_list: Whether it is a list (kept comma-joined in :attr:`LinuxParams.values`).
    """

    label: str
    keys: tuple[str, ...]
    is_list: bool = False


Values = tuple[str, ...]


@dataclass(frozen=True)
class Kind:
    """The organization parameters of one check.

    Attributes:
        check: The check's id.
        params: Its values, in order.
        rules: The requirement's control in several phrasings (without the values).
        draw: Draws the organization's values.
        decoy: Other values (a catalog's or a draft's) given the organization's.
        setup: The mutation making a clean host comply with the values.
        derive: The check with the values: truth, mutations and reference policy.
    """

    check: str
    params: tuple[Param, ...]
    rules: tuple[str, ...]
    draw: Callable[[random.Random], Values]
    decoy: Callable[[random.Random, Values], Values]
    setup: Callable[[Values], Mutation]
    derive: Callable[[Values], linux.LinuxCheck]
