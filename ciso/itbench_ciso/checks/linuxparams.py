"""The organization's own parameters of the Linux host requirements, drawn per trial.

A CIS-style control names limits (a maximum password age, a minimum length, the services that
must not run); an organization sets its own. Every trial of such a check draws the
organization's values from its secret-derived seed, the baseline file under ``/etc`` that keeps
them on every host (its path, format and key names) and how the requirement words it. Decoys
hold other values: a draft of the baseline at another path, a package manager's copy of an
older one (``.dpkg-old``) and commented-out lines of the file itself. Hidden hosts then hold
values the catalog's limits allow and the organization's do not (and the reverse), so a
playbook and policy written from the catalog's text alone fail; :mod:`.linuxkinds` holds what
each check's values mean.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from itbench_ciso.checks import linux, linuxkinds, linuxlists
from itbench_ciso.checks.linux_host import Host, HostFile, Mutation
from itbench_ciso.checks.linuxvalues import Kind, Values

#: Files that may keep an organization's baseline.
PATHS = (
    "/etc/corp/security-baseline.conf",
    "/etc/org/linux-hardening.conf",
    "/etc/compliance/host-policy.env",
    "/etc/security/org-baseline",
    "/etc/baseline/parameters.conf",
)
#: How the baseline writes a setting (lists: commas, or spaces in a shell assignment).
FORMATS = {
    "equals": "one setting a line as key = value, lists separated by commas, # starts a comment",
    "colon": "one setting a line as key: value, lists separated by commas, # starts a comment",
    "shell": 'shell assignments KEY="value", lists separated by spaces, # starts a comment',
}
#: The sentence saying where the values are (the keys listed in the kind's order).
WHERE = (
    "The organization's values are kept on every host in `{path}` ({shape}): {items}.",
    "Each host keeps the organization's parameters in the file `{path}` ({shape}); {items}.",
    "Read the organization's limits from `{path}` on the host ({shape}), where {items}.",
)
#: How one key is named, in two styles.
ITEMS = ("`{key}` holds {label}", "{label} is the value of `{key}`")
_TICK = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class LinuxParams:
    """One trial's organization values for one check.

    Attributes:
        kind: What the values mean.
        values: The organization's values (lists comma-joined).
        path: The baseline file on every host.
        shape: Its format (a key of :data:`FORMATS`).
        keys: The key of each value in the file.
        rule: Index into the kind's rules.
        phrasing: Index into :data:`WHERE`.
        item: Index into :data:`ITEMS`.
        decoy_path: Another of :data:`PATHS`, a draft listing other values.
        decoy_values: The values of the draft, the old copy and the commented lines.
        stale: Whether a ``.dpkg-old`` copy with the decoy's values lies beside the file.
    """

    kind: Kind
    values: Values
    path: str
    shape: str
    keys: tuple[str, ...]
    rule: int
    phrasing: int
    item: int
    decoy_path: str
    decoy_values: Values
    stale: bool

    def requirement(self) -> str:
        """The requirement as the trial states it (its control, then where the values are)."""
        items = "; ".join(
            ITEMS[self.item].format(key=k, label=p.label)
            for k, p in zip(self.keys, self.kind.params, strict=True)
        )
        where = WHERE[self.phrasing].format(path=self.path, shape=FORMATS[self.shape], items=items)
        return f"{self.kind.rules[self.rule]} {where}"

    def line(self, key: str, value: str) -> str:
        """One setting as the baseline's format writes it."""
        if self.shape == "shell":
            return f'{key}="{value.replace(",", " ")}"'
        sep = ": " if self.shape == "colon" else " = "
        return f"{key}{sep}{value.replace(',', ', ')}"

    def content(self, values: Values, head: str, old: Values = ()) -> str:
        """A baseline file with ``values`` (and ``old`` ones commented out above them)."""
        out = [head]
        for i, (key, value) in enumerate(zip(self.keys, values, strict=True)):
            if old and old[i] != value:
                out.append(f"# {self.line(key, old[i])}   (before ticket SEC-{3100 + 7 * i})")
            out.append(self.line(key, value))
        return "\n".join(out) + "\n"

    def install(self) -> Mutation:
        """The mutation giving a host the baseline, its decoys, and settings that comply."""
        setup = self.kind.setup(self.values)

        def mutate(host: Host) -> None:
            setup(host)
            head = "# Organization security baseline (approved by the security board)"
            host[self.path] = HostFile(self.content(self.values, head, self.decoy_values), 0o644)
            draft = "# DRAFT for the next review: not in force"
            host[self.decoy_path] = HostFile(self.content(self.decoy_values, draft), 0o644)
            if self.stale:
                host[f"{self.path}.dpkg-old"] = HostFile(
                    self.content(self.decoy_values, head), 0o644
                )

        return mutate

    def check(self) -> linux.LinuxCheck:
        """The check with these values."""
        return self.kind.derive(self.values)


def kinds() -> dict[str, Kind]:
    """Every check with organization parameters, by id."""
    return {**linuxkinds.KINDS, **linuxlists.KINDS}


def draw(check_id: str, rng: random.Random) -> LinuxParams | None:
    """A trial's values of ``check_id`` (None for a check without any)."""
    kind = kinds().get(check_id)
    if kind is None:
        return None
    values = kind.draw(rng)
    shape = rng.choice(sorted(FORMATS))
    keys = tuple(rng.choice(p.keys) for p in kind.params)
    if shape == "shell":
        keys = tuple(k.upper().replace(".", "_") for k in keys)
    path = rng.choice(PATHS)
    return LinuxParams(
        kind=kind,
        values=values,
        path=path,
        shape=shape,
        keys=keys,
        rule=rng.randrange(len(kind.rules)),
        phrasing=rng.randrange(len(WHERE)),
        item=rng.randrange(len(ITEMS)),
        decoy_path=rng.choice([p for p in PATHS if p != path]),
        decoy_values=kind.decoy(rng, values),
        stale=rng.random() < 0.6,
    )


class ParamsError(ValueError):
    """The organization's values cannot be read where the requirement says they are."""


def parse(text: str) -> dict[str, str]:
    """The settings of a baseline file (lists comma-joined; the last line of a key counts)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#")[0].strip()
        m = re.match(r"([A-Za-z0-9_.-]+)\s*[=:]\s*(.*)$", line)
        if m is None:
            continue
        value = m.group(2).strip().strip("\"'")
        out[m.group(1)] = ",".join(t for t in re.split(r"[,\s]+", value) if t)
    return out


def read(requirement: str, host_root: Path) -> tuple[Values, str] | None:
    """The values the requirement's baseline holds on the host tree at ``host_root``.

    Returns:
        The values in the order the requirement names their keys, and the file's path; None
        when the requirement names no file under ``/etc``.

    Raises:
        ParamsError: the file is missing or lacks a key (naming the file and why).
    """
    ticks = _TICK.findall(requirement)
    at = next((i for i, t in enumerate(ticks) if t.startswith("/etc/")), None)
    if at is None:
        return None
    path = host_root / ticks[at].lstrip("/")
    try:
        settings = parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParamsError(f"{path}: cannot be read ({exc.strerror})") from exc
    missing = [k for k in ticks[at + 1 :] if k not in settings]
    if missing:
        raise ParamsError(f"{path}: no setting {', '.join(missing)}")
    return tuple(settings[k] for k in ticks[at + 1 :]), ticks[at]


def derive_from(check_id: str, requirement: str, host_root: Path) -> linux.LinuxCheck | None:
    """The check ``check_id`` with the values the requirement's baseline holds on the host.

    None for a check without parameters or a requirement naming no baseline.
    """
    kind = kinds().get(check_id)
    found = read(requirement, host_root) if kind is not None else None
    if kind is None or found is None:
        return None
    values, _ = found
    if len(values) != len(kind.params):
        raise ParamsError(f"{check_id}: {len(values)} values named, {len(kind.params)} expected")
    return kind.derive(values)
