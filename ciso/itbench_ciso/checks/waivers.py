"""The organization's waivers: namespaces exempt from a Kubernetes requirement until a date.

Every Kubernetes trial draws where its organization keeps them (a config map's namespace,
name and key), how each entry is written, which day is today and how the requirement words
the rule. The hidden snapshots then hold violations in namespaces whose waiver still runs
(compliant) and in namespaces whose waiver has expired (violations), so a policy written from
the catalog's text alone, without reading the organization's waivers, fails.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from itbench_ciso.checks.k8s_cluster import meta

#: Where an organization may keep its waivers: namespaces, config map names, data keys.
HOMES = ("policy-system", "compliance", "governance", "security-ops")
NAMES = ("cis-waivers", "compliance-exceptions", "policy-exemptions", "security-waivers")
KEYS = ("namespaces", "waivers", "exempt", "entries")
#: How one entry is written: ``{ns}`` and ``{until}`` (YYYY-MM-DD), a ticket after them.
FORMATS = {
    "space": "{ns} {until} {ticket}",
    "colon": "{ns}: {until}  # {ticket}",
    "csv": "{ns},{until},{ticket}",
}
#: Namespaces a waiver names (never ``default`` nor a system namespace).
WAIVED = ("legacy-billing", "data-science", "vendor-gateway", "migration-tmp", "research-lab")

#: The requirement's sentence on waivers, in one of several phrasings. Each names the config
#: map as `namespace/name`, then its key in backticks, and today's date.
PHRASINGS = (
    "Our organization waives this requirement for the namespaces listed in the config map "
    "`{home}/{name}` under the key `{key}` (one entry per line: {shape}); a waiver holds up to "
    "and including its date, and today is {today}. Objects in a waived namespace are not "
    "violations; once a waiver has expired they are.",
    "Exceptions: the config map `{home}/{name}` (data key `{key}`, one line per waiver: "
    "{shape}) exempts whole namespaces until the date given, that day included. Take {today} "
    "as today; an expired exception exempts nothing.",
    "Namespaces with a current waiver in `{home}/{name}` (key `{key}`; lines read {shape}) are "
    "out of scope for this requirement. A waiver ends after its date; the audit date is "
    "{today}.",
)
_SHAPES = {
    "space": "the namespace, the last day, a ticket, separated by spaces",
    "colon": "`namespace: last-day`, then a comment with the ticket",
    "csv": "namespace,last-day,ticket",
}


@dataclass(frozen=True)
class Waivers:
    """One trial's waivers.

    Attributes:
        home: Namespace of the config map.
        name: Name of the config map.
        key: Its data key holding the entries.
        shape: Entry format (a key of :data:`FORMATS`).
        today: The audit date.
        phrasing: Index into :data:`PHRASINGS`.
        until: Namespace -> last day of its waiver.
        decoy: Another config map with waiver entries that are not the organization's (another
            team's, or a draft): its namespace, name, key and entries (namespace -> day).
        commented: Entries of the real config map that are commented out (namespace -> day).
    """

    home: str
    name: str
    key: str
    shape: str
    today: date
    phrasing: int
    until: dict[str, date] = field(default_factory=dict)
    decoy: tuple[str, str, str, dict[str, date]] | None = None
    commented: dict[str, date] = field(default_factory=dict)

    @property
    def active(self) -> tuple[str, ...]:
        """Namespaces whose waiver still holds today (in the order they were drawn)."""
        return tuple(ns for ns, last in self.until.items() if last >= self.today)

    @property
    def expired(self) -> tuple[str, ...]:
        """Namespaces whose waiver has ended (in the order they were drawn)."""
        return tuple(ns for ns, last in self.until.items() if last < self.today)

    def sentence(self) -> str:
        """The requirement's sentence on waivers."""
        return PHRASINGS[self.phrasing].format(
            home=self.home,
            name=self.name,
            key=self.key,
            shape=_SHAPES[self.shape],
            today=self.today.isoformat(),
        )

    def entries(self, until: dict[str, date] | None = None) -> str:
        """The config map's entries (one per line; commented-out ones start with ``#``)."""
        until = self.until if until is None else until
        rows = [(ns, last, "") for ns, last in until.items()]
        if until is self.until:
            rows += [(ns, last, "# ") for ns, last in self.commented.items()]
        lines = [
            prefix
            + FORMATS[self.shape].format(
                ns=ns, until=last.isoformat(), ticket=f"SEC-{1000 + i * 37}"
            )
            for i, (ns, last, prefix) in enumerate(sorted(rows, key=lambda r: (r[0], r[2])))
        ]
        return "\n".join(lines) + "\n"

    def objects(self) -> list[dict[str, Any]]:
        """The config map and its namespace (and the decoy's), as a snapshot holds them."""
        places = [(self.home, self.name, self.key, self.entries())]
        if self.decoy is not None:
            home, name, key, until = self.decoy
            places.append((home, name, key, self.entries(until)))
        out: list[dict[str, Any]] = []
        for home, name, key, text in places:
            labels = {"kubernetes.io/metadata.name": home}
            out += [
                {**meta("Namespace", home, labels=labels), "status": {"phase": "Active"}},
                {**meta("ConfigMap", name, home), "data": {key: text}},
            ]
        return out

    def waived(self, namespace: str) -> bool:
        """Whether objects of ``namespace`` are exempt today."""
        return namespace in self.active


def draw(rng: random.Random) -> Waivers:
    """A trial's waivers: one to four still current, none to three expired (two at least).

    Besides, a decoy config map (another team's, or a draft) waives namespaces whose real
    waiver has expired, and later than any real one; the real config map may hold
    commented-out entries doing the same.
    """
    today = date(2026, 1, 1) + timedelta(days=rng.randrange(365))
    current = rng.randint(1, 4)
    expired = rng.randint(1 if current < 2 else 0, min(3, len(WAIVED) - current))
    names = rng.sample(WAIVED, current + expired)
    until = {ns: today + timedelta(days=rng.choice((0, 3, 30, 120))) for ns in names[:current]}
    until |= {ns: today - timedelta(days=rng.choice((1, 9, 60))) for ns in names[current:]}
    home, name, key = rng.choice(HOMES), rng.choice(NAMES), rng.choice(KEYS)
    later = [today + timedelta(days=rng.randrange(200, 400)) for _ in WAIVED]
    lapsed = [ns for ns in WAIVED if ns not in until or until[ns] < today]
    while True:
        other_home = rng.choice(HOMES)
        other_name = rng.choice((f"{name}-draft", f"{name}-{rng.choice(_TEAMS)}", *NAMES))
        if (other_home, other_name) != (home, name):
            break
    chosen = rng.sample(WAIVED, rng.randint(2, 4))
    decoy = {ns: later[i] for i, ns in enumerate(sorted(set(chosen) | set(lapsed[:2])))}
    commented = {}
    if lapsed and rng.random() < 0.5:
        commented = {lapsed[-1]: later[-1]}
    return Waivers(
        home=home,
        name=name,
        key=key,
        shape=rng.choice(sorted(FORMATS)),
        today=today,
        phrasing=rng.randrange(len(PHRASINGS)),
        until=until,
        decoy=(other_home, other_name, rng.choice(KEYS), decoy),
        commented=commented,
    )


#: Teams whose own waiver config maps a cluster may hold.
_TEAMS = ("data-team", "payments", "lab")


_WHERE = re.compile(r"`([a-z0-9-]+)/([a-z0-9-]+)`[^`]*`([a-z0-9-]+)`")
_TODAY = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def rego(home: str, name: str, key: str, today: str) -> str:
    """Rules that keep the violations outside waived namespaces (``raw_violations`` -> ``violations``)."""
    return f"""waiver_today := "{today}"

waived_namespaces contains ns if {{
	some cm in input.items
	cm.kind == "ConfigMap"
	object.get(cm.metadata, "namespace", "") == "{home}"
	cm.metadata.name == "{name}"
	some line in regex.split(`\r?\n`, object.get(object.get(cm, "data", {{}}), "{key}", ""))
	found := regex.find_all_string_submatch_n(`^\\s*([a-z0-9][a-z0-9-]*)\\s*[:,\\s]\\s*(\\d{{4}}-\\d{{2}}-\\d{{2}})`, line, 1)
	count(found) == 1
	ns := found[0][1]
	found[0][2] >= waiver_today
}}

violations contains v if {{
	some v in raw_violations
	not waived_namespaces[v.namespace]
}}"""


def policy_for(requirement: str, policy: str) -> str:
    """``policy`` (which defines ``violations``) honouring the waivers ``requirement`` states.

    The policy is returned unchanged when the requirement states no waivers.
    """
    wheres, todays = _WHERE.findall(requirement), _TODAY.findall(requirement)
    if not wheres or not todays:
        return policy
    renamed = re.sub(r"^violations contains\b", "raw_violations contains", policy, flags=re.M)
    home, name, key = wheres[-1]
    return f"{renamed.rstrip()}\n\n{rego(home, name, key, todays[-1])}\n"
