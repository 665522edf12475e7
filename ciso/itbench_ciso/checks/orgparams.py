"""The organization's own parameters of a Kubernetes requirement, drawn per trial.

Some requirements only make sense with the organization's values: which Linux capabilities a
container may add, which node ports it may bind, which image registries are approved, in which
namespaces privileged containers are allowed. Every trial of such a check draws those values
from its secret-derived seed, where the organization keeps them (a config map, an annotation
of a namespace, or a standards document in the workspace), and how the requirement words
them. The hidden snapshots then hold objects using a listed value the catalog's default
would flag, values just outside the list and the catalog's default when the organization did
not list it, so a policy written from the catalog's text alone fails and one that reads the
trial's values passes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench_ciso.checks import k8sparams
from itbench_ciso.checks.k8s import (
    REGISTRY,
    UNPINNED_REGO,
    Factory,
    K8sCheck,
    _caps,
    _ctr,
    _sc,
    _wl,
    any_container,
    by_id,
    caps,
    cron,
    deploy,
    field_set,
    on,
    per_workload,
    pod,
    sc,
    spec_set,
    unpinned,
)
from itbench_ciso.checks.k8s_cluster import containers_of, meta

#: Namespaces, config map names and document paths where an organization may keep its values.
HOMES = ("platform-config", "org-standards", "policy-system", "cluster-baseline")
CONFIG_MAPS = ("platform-baseline", "security-standards", "cluster-guardrails", "org-parameters")
DOCUMENTS = ("standards/platform.md", "docs/security-baseline.md", "handbook/cluster-rules.md")
#: How a config map's data key separates its values.
SEPARATORS = {", ": "comma-separated", "\n": "one per line", " ": "separated by spaces"}

#: The sentence saying where the values are, in one of several phrasings.
PHRASINGS = (
    "The organization records {what} in {where}.",
    "{What_}: see {where}; that is the only source that counts.",
    "For {what}, the organization's only source is {where}.",
)

_CM = re.compile(r"config map `([a-z0-9-]+)` in namespace `([a-z0-9-]+)` \(data key `([^`]+)`")
_ANN = re.compile(r"annotation `([^`]+)` of namespace `([a-z0-9-]+)`")
_DOC = re.compile(r"heading \"([^\"]+)\" of the file `([^`]+)`")


@dataclass(frozen=True)
class Kind:
    """A class of organization parameters of one check.

    Attributes:
        check: The check's id.
        requirements: The requirement's rule in several phrasings (without the values).
        what: What the list holds (a noun phrase).
        keys: Config map data keys and annotation keys (``policy.`` prefixed) it may use.
        heading: The heading of the document section listing them.
        draw: Draws the organization's values.
        derive: The check with the organization's values: truth, mutations and reference.
        guarded: Whether the namespaces keeping the values get a network policy (for a rule
            on every namespace).
    """

    check: str
    requirements: tuple[str, ...]
    what: str
    keys: tuple[str, ...]
    heading: str
    draw: Callable[[random.Random], tuple[str, ...]]
    derive: Callable[[K8sCheck, tuple[str, ...]], K8sCheck]
    guarded: bool = False


@dataclass(frozen=True)
class Home:
    """Where a trial's values are kept.

    Attributes:
        kind: ``configmap``, ``annotation`` or ``document``.
        namespace: Namespace of the config map or the annotated namespace.
        name: Config map name or document path (relative to the workspace).
        key: Data key, annotation key or document heading.
        sep: Separator of the values (config map only).
    """

    kind: str
    namespace: str = ""
    name: str = ""
    key: str = ""
    sep: str = ", "

    def where(self) -> str:
        """Where the values are, as the requirement says it."""
        if self.kind == "configmap":
            return (
                f"the config map `{self.name}` in namespace `{self.namespace}` (data key "
                f"`{self.key}`, values {SEPARATORS[self.sep]})"
            )
        if self.kind == "annotation":
            return (
                f"the annotation `{self.key}` of namespace `{self.namespace}` (values "
                "comma-separated)"
            )
        return (
            f'the list under the heading "{self.key}" of the file `{self.name}` in your workspace'
        )


@dataclass(frozen=True)
class OrgParams:
    """One trial's organization parameters for one check.

    Attributes:
        kind: The class of parameters (and its check).
        values: The organization's values (integers written as digits).
        home: Where they are kept.
        phrasing: Index into :data:`PHRASINGS`.
        rule: Index into the kind's requirement phrasings.
        decoys: Other places holding other values under the same keys (a staging copy, a
            superseded list, another team's namespace), each with its values.
        salt: Seed of the documents' layout (where the decoy list is, how it is marked).
    """

    kind: Kind
    values: tuple[str, ...]
    home: Home
    phrasing: int
    rule: int
    decoys: tuple[tuple[Home, tuple[str, ...]], ...] = ()
    salt: int = 0

    def requirement(self) -> str:
        """The requirement as the trial states it (its rule, then where the values are)."""
        what = self.kind.what
        sentence = PHRASINGS[self.phrasing].format(
            what=what, What_=what[0].upper() + what[1:], where=self.home.where()
        )
        return f"{self.kind.requirements[self.rule]} {sentence}"

    def check(self) -> K8sCheck:
        """The check with this organization's values."""
        return self.kind.derive(by_id(self.kind.check), self.values)

    def objects(self) -> list[dict[str, Any]]:
        """What every snapshot holds: the organization's place (unless a document) and decoys."""
        out: list[dict[str, Any]] = []
        if self.home.kind != "document":
            out += _place(self.home, self.values)
        for home, values in self.decoys:
            out += _place(home, values)
        if self.kind.guarded:
            names = sorted({o["metadata"]["name"] for o in out if o["kind"] == "Namespace"})
            deny = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
            out += [{**meta("NetworkPolicy", "default-deny", ns), "spec": deny} for ns in names]
        return out

    def documents(self) -> dict[str, str]:
        """The workspace's standards documents (path -> text), for a document home.

        The named file lists the values under the named heading and other values under a
        marked heading (before or after it); another file may list other values under the very
        same heading.
        """
        if self.home.kind != "document":
            return {}
        rng = random.Random(self.salt)
        items = "\n".join(f"- {v}" for v in self.values)
        decoy = "\n".join(f"- {v}" for v in _other_values(self.kind, self.values, rng))
        marked = f"## {self.kind.heading} ({rng.choice(_MARKERS)})\n\n{decoy}\n\n"
        real = f"## {self.home.key}\n\n{items}\n\n"
        sections = [marked, real] if rng.random() < 0.5 else [real, marked]
        head = (
            "# Platform standards\n\nThese lists are maintained by the platform team. Changes "
            "go through a ticket.\n\n"
        )
        docs = {self.home.name: head + "".join(sections) + "## Contacts\n\n- platform-team\n"}
        if rng.random() < 0.75:
            other = rng.choice([d for d in DOCUMENTS if d != self.home.name])
            values = "\n".join(f"- {v}" for v in _other_values(self.kind, self.values, rng))
            docs[other] = f"# {rng.choice(_OTHER_DOCS)}\n\n## {self.kind.heading}\n\n{values}\n"
        return docs

    def document(self) -> str:
        """The named standards document (for a document home; empty otherwise)."""
        return self.documents().get(self.home.name, "")


#: How a document marks a list that is not the one in force.
_MARKERS = (
    "proposed, not yet in force",
    "superseded",
    "staging clusters only",
    "draft",
    "previous revision",
    "lab team",
)
#: Titles of another team's or an older document.
_OTHER_DOCS = ("Lab cluster standards", "Standards (2023 revision)", "Draft: next baseline")
#: Config map names of a copy that is not in force.
_COPIES = ("-staging", "-previous", "-draft")
_HOSTS = ("policy.corp.example", "standards.corp.example", "compliance.corp.io")
#: CPU maximums a decoy may state (one below and one above any the organization may draw).
_CPU_DECOYS = ("600m", "750m", "1", "1500m", "2", "3", "4")


def _place(home: Home, values: tuple[str, ...]) -> list[dict[str, Any]]:
    """The namespace (and config map) keeping ``values`` at ``home``."""
    ns = home.namespace
    namespace = meta("Namespace", ns, labels={"kubernetes.io/metadata.name": ns})
    if home.kind == "annotation":
        namespace["metadata"]["annotations"] = {home.key: ",".join(values)}
    out: list[dict[str, Any]] = [{**namespace, "status": {"phase": "Active"}}]
    if home.kind == "configmap":
        data = {home.key: home.sep.join(values) + "\n"}
        out.append({**meta("ConfigMap", home.name, ns), "data": data})
    return out


def _other_values(kind: Kind, values: tuple[str, ...], rng: random.Random) -> tuple[str, ...]:
    """Values of ``kind`` other than ``values`` (a different set), drawn from the same pool."""
    if kind.draw is _draw_cpu:
        return (rng.choice([q for q in _CPU_DECOYS if q != values[0]]),)
    while True:
        other = kind.draw(rng)
        if set(other) != set(values):
            return other


def _decoys(
    kind: Kind, values: tuple[str, ...], home: Home, rng: random.Random
) -> tuple[tuple[Home, tuple[str, ...]], ...]:
    """Two or three other places under the kind's keys, each with other values.

    Config maps never share the real one's namespace and name, annotations never its
    namespace and key. For a CPU maximum, one decoy states a higher maximum and one a lower.
    """
    cms = {(home.namespace, home.name)} if home.kind == "configmap" else set()
    anns = {(home.namespace, home.key)} if home.kind == "annotation" else set()
    out: list[tuple[Home, tuple[str, ...]]] = []
    shapes = ["configmap", "annotation", rng.choice(("configmap", "annotation"))]
    if home.kind in ("configmap", "annotation"):
        shapes[2] = home.kind
    for shape in shapes[: rng.choice((2, 3))] if home.kind == "document" else shapes:
        if shape == "configmap":
            while True:
                ns = rng.choice(HOMES)
                base = home.name if home.kind == "configmap" else rng.choice(CONFIG_MAPS)
                name = rng.choice((base, base + rng.choice(_COPIES), rng.choice(CONFIG_MAPS)))
                if (ns, name) not in cms:
                    break
            cms.add((ns, name))
            place = Home(
                "configmap", ns, name, rng.choice(kind.keys), rng.choice(sorted(SEPARATORS))
            )
        else:
            while True:
                ns = rng.choice(HOMES)
                key = f"{rng.choice(_HOSTS)}/{rng.choice(kind.keys)}"
                if (ns, key) not in anns:
                    break
            anns.add((ns, key))
            place = Home("annotation", ns, key=key)
        out.append((place, _other_values(kind, values, rng)))
    if kind.draw is _draw_cpu:
        cap = millicores(values[0])
        higher = [q for q in _CPU_DECOYS if millicores(q) > cap]
        lower = [q for q in _CPU_DECOYS if millicores(q) < cap]
        out[0] = (out[0][0], (rng.choice(higher),))
        out[1] = (out[1][0], (rng.choice(lower),))
        rng.shuffle(out)
    return tuple(out)


def _draw_caps(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.sample(_CAP_POOL, rng.choice((2, 3))))


_CAP_POOL = (
    "NET_BIND_SERVICE",
    "CHOWN",
    "NET_RAW",
    "SYS_TIME",
    "SETUID",
    "SETGID",
    "KILL",
    "SYS_NICE",
    "AUDIT_WRITE",
    "DAC_OVERRIDE",
)
_CAP_DANGER = ("SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE", "SYS_MODULE")


def _rego_set(values: tuple[str, ...], numeric: bool = False) -> str:
    return "{" + ", ".join(v if numeric else json.dumps(v) for v in values) + "}"


def _derive_caps(check: K8sCheck, approved: tuple[str, ...], drop_all: bool = False) -> K8sCheck:
    """Added capabilities outside ``approved`` violate (and, with ``drop_all``, not dropping ALL)."""
    ok = set(approved)
    out = [c for c in _CAP_POOL + _CAP_DANGER if c not in ok]
    default = "NET_BIND_SERVICE"
    # An unlisted default is a violation the catalog's text would let through.
    d = default if default not in ok else out[3]
    a0, a1, a2 = approved[0], approved[1], approved[-1]
    init_drop = ["ALL"] if drop_all else None
    bad: dict[str, Factory] = {
        f"adds {out[0]}": pod(on("main", caps(add=[out[0]], drop=["ALL"]))),
        f"deployment adds {d}": deploy(on("main", caps(add=[d], drop=["ALL"]))),
        f"init container adds {out[1]}": deploy(on("init", caps(add=[out[1]], drop=init_drop))),
        f"adds {a0} and {out[2]}": pod(on("sidecar", caps(add=[a0, out[2]], drop=["ALL"]))),
        f"ephemeral container adds {out[-1]}": pod(
            on("ephemeral", caps(add=[out[-1]], drop=init_drop))
        ),
        "in a cron job": cron(on("main", caps(add=[out[4]], drop=["ALL"]))),
    }
    near: dict[str, Factory] = {
        f"adds {a0}": pod(on("main", caps(add=[a0], drop=["ALL"]))),
        f"deployment adds {a1}": deploy(on("main", caps(add=[a1], drop=["ALL"]))),
        f"init adds {a2}": deploy(on("init", caps(add=[a2], drop=init_drop))),
        "adds every approved one": pod(on("sidecar", caps(add=list(approved), drop=["ALL"]))),
        "empty add list": pod(on("sidecar", caps(add=[], drop=["ALL"]))),
    }
    rego = f"approved_capabilities := {_rego_set(approved)}\n\n" + _ctr(
        "\tsome cap in c.securityContext.capabilities.add\n\tnot approved_capabilities[cap]"
    )
    if drop_all:
        bad[f"adds {a1}, drops only NET_RAW"] = deploy(
            on("sidecar", caps(add=[a1], drop=["NET_RAW"]))
        )
        near[f"adds {a2}, drops NET_RAW then ALL"] = deploy(
            on("main", caps(add=[a2], drop=["NET_RAW", "ALL"]))
        )
        rego += "\n\n" + _ctr(
            '\tnot "ALL" in object.get(c, ["securityContext", "capabilities", "drop"], [])'
        )
    else:
        near[f"drops {out[0]}"] = deploy(on("main", caps(drop=[out[0], out[1]])))

    def violates(c: dict[str, Any]) -> bool:
        unlisted = any(x not in ok for x in _caps(c, "add"))
        return unlisted or (drop_all and "ALL" not in _caps(c, "drop"))

    return dataclasses.replace(check, rego=rego, truth=any_container(violates), bad=bad, near=near)


_PORT_POOL = ("53", "80", "443", "2049", "3000", "5000", "8080", "8443", "9090", "9100")


def _draw_ports(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.sample(_PORT_POOL, rng.choice((2, 3))))


def _ports(*entries: tuple[int, int, str]) -> Callable[[dict[str, Any]], None]:
    return field_set(
        ports=[{"containerPort": c, "hostPort": h, "protocol": p} for c, h, p in entries]
    )


def _derive_ports(check: K8sCheck, allowed: tuple[str, ...]) -> K8sCheck:
    ok = {int(p) for p in allowed}
    a0, a1, a2 = (int(allowed[0]), int(allowed[1]), int(allowed[-1]))
    # Just outside the list: the next port up (never listed) and unlisted ports of the pool.
    above = next(p for p in range(a0 + 1, 65536) if p not in ok)
    below = next(p for p in range(a1 - 1, 0, -1) if p not in ok)
    out = [int(p) for p in _PORT_POOL if int(p) not in ok]
    bad: dict[str, Factory] = {
        f"hostPort {out[0]}": pod(on("main", _ports((out[0], out[0], "TCP")))),
        f"hostPort {above}, next to a listed one": deploy(on("main", _ports((a0, above, "TCP")))),
        f"sidecar hostPort {below}": deploy(on("sidecar", _ports((below, below, "TCP")))),
        f"UDP hostPort {out[1]}": pod(on("main", _ports((out[1], out[1], "UDP")))),
        f"listed {a2} and unlisted {out[2]}": deploy(
            on("main", _ports((a2, a2, "TCP"), (out[2], out[2], "TCP")))
        ),
        "in a cron job": cron(on("main", _ports((out[-1], out[-1], "TCP")))),
    }
    near: dict[str, Factory] = {
        f"hostPort {a0}": pod(on("main", _ports((a0, a0, "TCP")))),
        f"hostPort {a1} mapped from another container port": deploy(
            on("main", _ports((a1 + 10000, a1, "TCP")))
        ),
        f"sidecar hostPort {a2}": pod(on("sidecar", _ports((a2, a2, "TCP")))),
        "hostPort 0": deploy(on("main", field_set(ports=[{"containerPort": 8080, "hostPort": 0}]))),
        "container ports only": pod(
            on("main", field_set(ports=[{"containerPort": out[0]}, {"containerPort": out[1]}]))
        ),
        "every listed port, UDP": deploy(
            on("main", _ports(*((int(p), int(p), "UDP") for p in allowed)))
        ),
    }
    rego = f"allowed_host_ports := {_rego_set(allowed, numeric=True)}\n\n" + _ctr(
        '\tsome p in c.ports\n\tport := object.get(p, "hostPort", 0)\n\tport > 0\n'
        "\tnot allowed_host_ports[port]"
    )
    return dataclasses.replace(
        check,
        rego=rego,
        truth=any_container(
            lambda c: any(
                (p.get("hostPort") or 0) > 0 and p.get("hostPort") not in ok
                for p in c.get("ports") or []
            )
        ),
        bad=bad,
        near=near,
    )


#: Registries an organization may approve besides its internal one (prefixes of image names).
_REGISTRY_POOL = (
    "mirror.corp.example:5000",
    "ghcr.io/acme-platform",
    "quay.io/corp-ops",
    "eu.gcr.io/corp-build",
    "registry.partner.example",
)


def _draw_registries(rng: random.Random) -> tuple[str, ...]:
    extra = rng.sample(_REGISTRY_POOL, rng.choice((1, 2)))
    return tuple(rng.sample([REGISTRY, *extra], 1 + len(extra)))


def _derive_registries(check: K8sCheck, approved: tuple[str, ...]) -> K8sCheck:
    ok = tuple(approved)
    extra = [r for r in approved if r != REGISTRY]
    other = [r for r in _REGISTRY_POOL if r not in ok]
    e0, e1 = extra[0], extra[-1]

    def listed(image: str) -> bool:
        return any(image.startswith(f"{r}/") for r in ok)

    bad: dict[str, Factory] = {
        "public registry, pinned": pod(
            on("main", field_set(image="docker.io/library/nginx:1.27.2"))
        ),
        f"unlisted {other[0]}": deploy(on("main", field_set(image=f"{other[0]}/shop/cart:4.1.0"))),
        f"look-alike of {e0}": pod(on("sidecar", field_set(image=f"{e0}-dev/ops/agent:2.3.1"))),
        f"{e1}, latest": deploy(on("init", field_set(image=f"{e1}/x/migrate:latest"))),
        "internal registry, untagged": pod(on("main", field_set(image=f"{REGISTRY}/shop/cart"))),
        "in a cron job": cron(on("main", field_set(image=f"{other[-1]}/batch/report:1.0"))),
    }
    near: dict[str, Factory] = {
        "digest": pod(on("main", field_set(image=f"{REGISTRY}/shop/cart@sha256:" + "ab" * 32))),
        f"listed {e0}": deploy(on("main", field_set(image=f"{e0}/shop/cart:4.1.0"))),
        f"init container from {e1}": deploy(on("init", field_set(image=f"{e1}/x/migrate:1.0.4"))),
        f"sidecar from {e0} by digest": pod(
            on("sidecar", field_set(image=f"{e0}/ops/agent@sha256:" + "cd" * 32))
        ),
        "tag latest-stable": deploy(
            on("sidecar", field_set(image=f"{REGISTRY}/ops/agent:latest-stable"))
        ),
    }
    rego = (
        f"approved_registries := {_rego_set(approved)}\n\n"
        + _ctr("\tunpinned(c.image)")
        + "\n\n"
        + _ctr("\tnot approved_image(c.image)")
        + """

approved_image(image) if {
	some r in approved_registries
	startswith(image, concat("", [r, "/"]))
}"""
        + UNPINNED_REGO
    )
    return dataclasses.replace(
        check,
        rego=rego,
        truth=any_container(lambda c: unpinned(c["image"]) or not listed(c["image"])),
        bad=bad,
        near=near,
    )


_NS_POOL = ("observability", "ingress-nginx", "storage-system", "node-agents", "gpu-operator")


def _draw_namespaces(rng: random.Random) -> tuple[str, ...]:
    extra = rng.sample(_NS_POOL, rng.choice((1, 2)))
    return tuple(rng.sample(["kube-system", *extra], 1 + len(extra)))


def _derive_namespaces(
    check: K8sCheck, exempt: tuple[str, ...], host_namespaces: bool = False
) -> K8sCheck:
    """Privileged containers (or a shared host namespace) outside ``exempt`` violate."""
    ok = set(exempt)
    extra = [n for n in exempt if n != "kube-system"]
    other = [n for n in _NS_POOL if n not in ok]
    e0, e1 = extra[0], extra[-1]
    if host_namespaces:
        net, pid, ipc = (
            spec_set(hostNetwork=True),
            spec_set(hostPID=True),
            spec_set(hostIPC=True),
        )
        fine = spec_set(hostNetwork=False, hostPID=False, hostIPC=False)
    else:
        priv = on("main", sc(privileged=True))
        net, pid, ipc = priv, on("init", sc(privileged=True)), on("sidecar", sc(privileged=True))
        fine = on("main", sc(privileged=False))
    bad: dict[str, Factory] = {
        "in an application namespace": pod(net),
        f"in unlisted {other[0]}": deploy(pid, namespace=other[0]),
        "in kube-public": deploy(ipc, namespace="kube-public"),
        f"in {e0}-staging": pod(ipc, namespace=f"{e0}-staging"),
        "deployment in an application namespace": deploy(pid),
        "in a cron job": cron(net, namespace=other[-1]),
    }
    near: dict[str, Factory] = {
        f"in {e0}": pod(net, namespace=e0),
        f"deployment in {e1}": deploy(pid, namespace=e1),
        "in kube-system": deploy(ipc, namespace="kube-system"),
        f"pod in {e1}": pod(ipc, namespace=e1),
        f"not set, in {other[0]}": deploy(fine, namespace=other[0]),
    }
    where = '\tnot exempt_namespaces[object.get(o.metadata, "namespace", "")]'
    if host_namespaces:
        rego = f"exempt_namespaces := {_rego_set(exempt)}\n\n" + "\n\n".join(
            _wl(f"\tspec.{f} == true\n{where}") for f in ("hostNetwork", "hostPID", "hostIPC")
        )
    else:
        rego = f"exempt_namespaces := {_rego_set(exempt)}\n\n" + _ctr(
            f"\tc.securityContext.privileged == true\n{where}"
        )

    def violates(s: dict[str, Any]) -> bool:
        if host_namespaces:
            return any(s.get(f) is True for f in ("hostNetwork", "hostPID", "hostIPC"))
        return any(_sc(c).get("privileged") is True for c in containers_of(s))

    return dataclasses.replace(
        check,
        rego=rego,
        truth=per_workload(lambda o, s: o["metadata"].get("namespace") not in ok and violates(s)),
        bad=bad,
        near=near,
    )


#: Maximum CPU limits an organization may set (the background's containers ask for 500m).
_CPU_POOL = ("750m", "1", "1500m", "2", "3")


def _draw_cpu(rng: random.Random) -> tuple[str, ...]:
    return (rng.choice(_CPU_POOL),)


def millicores(quantity: Any) -> float:
    """A CPU quantity (``"1500m"``, ``"1.5"``, ``2``) in millicores.

    Raises:
        ValueError: ``quantity`` is not a CPU quantity.
    """
    if isinstance(quantity, bool) or not isinstance(quantity, (int, float, str)):
        raise ValueError(f"not a CPU quantity: {quantity!r}")
    if isinstance(quantity, str) and quantity.endswith("m"):
        return float(quantity[:-1])
    return float(quantity) * 1000


def _other_units(quantity: str) -> str:
    """The same quantity written the other way (cores against millicores)."""
    milli = millicores(quantity)
    if quantity.endswith("m"):
        return f"{milli / 1000:g}"
    return f"{milli:g}m"


def _limits(cpu: Any, memory: str | None = "256Mi") -> Callable[[dict[str, Any]], None]:
    limits = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    return field_set(resources={"limits": limits, "requests": {"cpu": "100m", "memory": "128Mi"}})


def _derive_cpu(check: K8sCheck, values: tuple[str, ...], requests: bool = False) -> K8sCheck:
    """Missing limits (or requests, with ``requests``) or a CPU limit above the maximum."""
    top = values[0]
    cap = millicores(top)
    above = f"{cap + 50:g}m"
    double = f"{2 * cap / 1000:g}"

    def over(c: dict[str, Any]) -> bool:
        limits = (c.get("resources") or {}).get("limits") or {}
        asks = (c.get("resources") or {}).get("requests") or {}
        if requests and not (asks.get("cpu") and asks.get("memory")):
            return True
        return not limits.get("cpu") or not limits.get("memory") or millicores(limits["cpu"]) > cap

    bad: dict[str, Factory] = {
        "no limits": pod(on("main", field_set(resources={"requests": {"cpu": "100m"}}))),
        f"cpu limit {above}, just above the maximum": deploy(on("main", _limits(above))),
        f"init container cpu limit {double}": deploy(on("init", _limits(double))),
        f"sidecar cpu limit {above}": pod(on("sidecar", _limits(above, "512Mi"))),
        "memory limit missing": deploy(on("sidecar", _limits("250m", None))),
        "in a cron job": cron(on("main", _limits(f"{cap * 4:g}m"))),
    }
    near: dict[str, Factory] = {
        f"cpu limit {top}, the maximum": pod(on("main", _limits(top))),
        f"cpu limit {_other_units(top)}, the maximum in other units": deploy(
            on("main", _limits(_other_units(top)))
        ),
        f"init container cpu limit {top}": deploy(on("init", _limits(top, "1Gi"))),
        "cpu limit 250m": pod(on("sidecar", _limits("250m", "1Gi"))),
        "ephemeral container (no resources allowed)": pod(on("ephemeral")),
    }
    asked = ""
    if requests:
        bad["cpu request missing"] = deploy(
            on(
                "sidecar",
                field_set(
                    resources={
                        "limits": {"cpu": top, "memory": "1Gi"},
                        "requests": {"memory": "1Gi"},
                    }
                ),
            )
        )
        asked = "\tc.resources.requests.cpu\n\tc.resources.requests.memory\n"
    rego = (
        f"max_cpu_millicores := {cap:g}\n\n"
        + _wl(
            '\tsome c in array.concat(object.get(spec, "containers", []), '
            'object.get(spec, "initContainers", []))\n\tnot within(c)'
        )
        + """

within(c) if {
"""
        + asked
        + """	c.resources.limits.memory
	millicores(c.resources.limits.cpu) <= max_cpu_millicores
}

millicores(q) := to_number(trim_suffix(q, "m")) if {
	is_string(q)
	endswith(q, "m")
}

millicores(q) := to_number(q) * 1000 if {
	is_string(q)
	not endswith(q, "m")
}

millicores(q) := q * 1000 if is_number(q)"""
    )
    return dataclasses.replace(
        check,
        rego=rego,
        truth=per_workload(
            lambda o, s: any(
                over(c) for c in [*s.get("containers", []), *s.get("initContainers", [])]
            )
        ),
        bad=bad,
        near=near,
    )


KINDS: dict[str, Kind] = {
    k.check: k
    for k in (
        Kind(
            check="k8s-added-capabilities",
            requirements=(
                "Minimize the admission of containers with added capabilities. No container "
                "of any workload may add a Linux capability the organization has not approved.",
                "Containers may add only approved Linux capabilities: a capability added by any "
                "container of any workload must be on the organization's list.",
            ),
            what="the Linux capabilities containers may add",
            keys=("allowed-capabilities", "approved-caps", "capabilities"),
            heading="Approved container capabilities",
            draw=_draw_caps,
            derive=_derive_caps,
        ),
        Kind(
            check="k8s-host-ports",
            requirements=(
                "Minimize the admission of containers which use HostPorts. No container of any "
                "workload may bind a port of its node unless that port is on the "
                "organization's allowlist.",
                "Node ports are allowlisted: a hostPort of any container of any workload must "
                "be one the organization allows.",
            ),
            what="the host ports containers may bind",
            keys=("allowed-node-ports", "hostport-allowlist", "port-allowlist"),
            heading="Allowed host ports",
            draw=_draw_ports,
            derive=_derive_ports,
        ),
        Kind(
            check="k8s-resource-limits",
            requirements=(
                "Resource limits are mandatory and bounded. Every container and init container "
                "of every workload must set both a CPU limit and a memory limit, and its CPU "
                "limit may not exceed the organization's maximum.",
                "Every container and init container of every workload must set a CPU limit and "
                "a memory limit; a CPU limit above the organization's maximum is a violation.",
            ),
            what="the maximum CPU limit of a container (a Kubernetes CPU quantity)",
            keys=("max-cpu-limit", "cpu-limit-max", "container-cpu-ceiling"),
            heading="Maximum container CPU limit",
            draw=_draw_cpu,
            derive=_derive_cpu,
        ),
        Kind(
            check="k8s-limits-and-requests",
            requirements=(
                "Resource management: every container and init container of every workload "
                "must set CPU and memory limits and CPU and memory requests, and its CPU limit "
                "may not exceed the organization's maximum.",
                "Every container and init container of every workload must set CPU and memory "
                "requests and limits; a CPU limit above the organization's maximum is a "
                "violation.",
            ),
            what="the maximum CPU limit of a container (a Kubernetes CPU quantity)",
            keys=("max-cpu-limit", "cpu-limit-max", "container-cpu-ceiling"),
            heading="Maximum container CPU limit",
            draw=_draw_cpu,
            derive=functools.partial(_derive_cpu, requests=True),
        ),
        Kind(
            check="k8s-capabilities-drop-all",
            requirements=(
                "Minimize the admission of containers with capabilities assigned. Every "
                "container of every workload must drop all capabilities and may add back only "
                "capabilities the organization approves.",
                "Containers drop ALL capabilities; a container of any workload may add only "
                "capabilities on the organization's list.",
            ),
            what="the Linux capabilities containers may add",
            keys=("allowed-capabilities", "approved-caps", "capabilities"),
            heading="Approved container capabilities",
            draw=_draw_caps,
            derive=functools.partial(_derive_caps, drop_all=True),
        ),
        Kind(
            check="k8s-host-namespaces",
            requirements=(
                "Minimize the admission of containers wishing to share the host's namespaces. "
                "No workload may share the host's process ID, IPC or network namespace, unless "
                "it is in a namespace the organization exempts.",
                "Outside the exempt namespaces, no workload (a pod, or the pod template of a "
                "controller) may use the host's network, PID or IPC namespace.",
            ),
            what="the namespaces exempt from this rule",
            keys=("host-namespace-exempt", "exempt-namespaces", "node-level-namespaces"),
            heading="Namespaces allowed to share host namespaces",
            draw=_draw_namespaces,
            derive=functools.partial(_derive_namespaces, host_namespaces=True),
        ),
        Kind(
            check="k8s-image-registry",
            requirements=(
                "Trusted images only: every container image of every workload must come from "
                "a registry the organization approves and be pinned by digest or by a tag "
                "other than latest.",
                "Images must be pinned (a digest, or a tag other than latest) and pulled from "
                "an approved registry, for every container of every workload.",
            ),
            what="the approved image registries (an image's name starts with one, then a slash)",
            keys=("approved-registries", "registries", "trusted-registries"),
            heading="Approved registries",
            draw=_draw_registries,
            derive=_derive_registries,
        ),
        Kind(
            check="k8s-privileged-except-system",
            requirements=(
                "No privileged containers outside the exempt namespaces: no container of any "
                "workload may run privileged, unless the workload is in a namespace the "
                "organization exempts.",
                "Privileged containers are allowed only in exempt namespaces; anywhere else, no "
                "container of any workload may run privileged.",
            ),
            what="the namespaces exempt from this rule",
            keys=("privileged-namespaces", "exempt-namespaces", "privileged-allowed"),
            heading="Namespaces allowed to run privileged workloads",
            draw=_draw_namespaces,
            derive=_derive_namespaces,
        ),
        Kind(
            check="k8s-default-namespace",
            requirements=(
                "The default namespace should not be used. Apart from what Kubernetes itself "
                "manages there (the kubernetes service, the default service account, the "
                "kube-root-ca.crt config map and the namespace's network policies) and the "
                "objects the organization tolerates there under a ticket, no object may be "
                "in the namespace default.",
                "Nothing may live in the namespace default except what Kubernetes manages (the "
                "kubernetes service, the default service account, kube-root-ca.crt, network "
                "policies) and the objects the organization tolerates there.",
            ),
            what="the objects tolerated in the namespace default (each as Kind/name)",
            keys=("default-ns-tolerated", "tolerated-in-default", "default-ns-exceptions"),
            heading="Objects tolerated in the default namespace",
            draw=k8sparams.draw_tolerated,
            derive=k8sparams.derive_tolerated,
        ),
        Kind(
            check="k8s-network-policies",
            requirements=(
                "Ensure that all Namespaces have Network Policies defined. Every namespace "
                "other than the Kubernetes system namespaces (kube-system, kube-public, "
                "kube-node-lease) and those the organization exempts must contain at least one "
                "NetworkPolicy.",
                "Each namespace must hold a NetworkPolicy, except the system namespaces "
                "(kube-system, kube-public, kube-node-lease) and the namespaces the "
                "organization exempts.",
            ),
            what="the namespaces exempt from the network-policy rule",
            keys=("netpol-exempt", "network-policy-exempt", "unisolated-namespaces"),
            heading="Namespaces exempt from network policies",
            draw=k8sparams.draw_exempt,
            derive=k8sparams.derive_exempt,
            guarded=True,
        ),
        Kind(
            check="k8s-rbac-cluster-admin",
            requirements=(
                "Ensure that the cluster-admin role is only used where required. The "
                "ClusterRole cluster-admin may be bound to no subject other than the group "
                "system:masters and the subjects the organization allows.",
                "Bindings of the ClusterRole cluster-admin (cluster-wide or in a namespace) may "
                "name only the group system:masters and the subjects the organization allows.",
            ),
            what="the subjects allowed to hold cluster-admin (each as Kind:name)",
            keys=("cluster-admin-subjects", "allowed-cluster-admins", "break-glass-admins"),
            heading="Subjects allowed cluster-admin",
            draw=k8sparams.draw_admins,
            derive=k8sparams.derive_admins,
        ),
    )
}


def draw(check_id: str, rng: random.Random) -> OrgParams | None:
    """A trial's parameters of ``check_id`` (None for a check without any)."""
    kind = KINDS.get(check_id)
    if kind is None:
        return None
    values = kind.draw(rng)
    where = rng.choice(("configmap", "annotation", "document"))
    if where == "configmap":
        home = Home(
            "configmap",
            namespace=rng.choice(HOMES),
            name=rng.choice(CONFIG_MAPS),
            key=rng.choice(kind.keys),
            sep=rng.choice(sorted(SEPARATORS)),
        )
    elif where == "annotation":
        host = rng.choice(_HOSTS)
        home = Home(
            "annotation", namespace=rng.choice(HOMES), key=f"{host}/{rng.choice(kind.keys)}"
        )
    else:
        home = Home("document", name=rng.choice(DOCUMENTS), key=kind.heading)
    return OrgParams(
        kind=kind,
        values=values,
        home=home,
        phrasing=rng.randrange(len(PHRASINGS)),
        rule=rng.randrange(len(kind.requirements)),
        decoys=_decoys(kind, values, home, rng),
        salt=rng.getrandbits(64),
    )


class ParamsError(ValueError):
    """The organization's values cannot be read where the requirement says they are."""


def read(requirement: str, snapshot: dict[str, Any], workspace: Path) -> tuple[str, ...] | None:
    """The values the requirement points to, read from the snapshot or the workspace.

    Args:
        requirement: The requirement as the trial states it.
        snapshot: The visible cluster snapshot.
        workspace: The agent's workspace (documents are relative to it).

    Returns:
        The values, or None when the requirement names no place.

    Raises:
        ParamsError: the place named holds no values (naming the place and why).
    """
    if m := _CM.search(requirement):
        name, ns, key = m.groups()
        for o in snapshot.get("items", []):
            md = o.get("metadata", {})
            if (
                o.get("kind") == "ConfigMap"
                and md.get("name") == name
                and md.get("namespace") == ns
            ):
                text = str((o.get("data") or {}).get(key, ""))
                values = tuple(v for v in re.split(r"[,\s]+", text) if v)
                if values:
                    return values
                raise ParamsError(f"config map {ns}/{name}: data key {key!r} holds no values")
        raise ParamsError(f"config map {ns}/{name}: not in the snapshot")
    if m := _ANN.search(requirement):
        key, ns = m.groups()
        for o in snapshot.get("items", []):
            md = o.get("metadata", {})
            if o.get("kind") == "Namespace" and md.get("name") == ns:
                text = str((md.get("annotations") or {}).get(key, ""))
                values = tuple(v.strip() for v in text.split(",") if v.strip())
                if values:
                    return values
                raise ParamsError(f"namespace {ns}: annotation {key!r} holds no values")
        raise ParamsError(f"namespace {ns}: not in the snapshot")
    if m := _DOC.search(requirement):
        heading, rel = m.groups()
        path = workspace / rel
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ParamsError(f"{path}: cannot be read ({exc.strerror})") from exc
        listed: list[str] = []
        inside = False
        for line in lines:
            if line.startswith("#"):
                inside = line.lstrip("#").strip() == heading
            elif inside and line.startswith("- "):
                listed.append(line[2:].strip())
        if listed:
            return tuple(listed)
        raise ParamsError(f"{path}: no list under the heading {heading!r}")
    return None


def policy(check_id: str, values: tuple[str, ...]) -> str:
    """The reference policy of ``check_id`` for the organization's ``values``."""
    kind = KINDS[check_id]
    return kind.derive(by_id(check_id), values).policy()
