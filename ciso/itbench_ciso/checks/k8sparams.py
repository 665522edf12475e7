"""Organization values of the cluster-wide Kubernetes checks (kept as :mod:`.orgparams` keeps them).

Objects the organization tolerates in the default namespace (each with a ticket), namespaces
it exempts from the network-policy rule, and subjects it allows to hold cluster-admin. Hidden
snapshots hold a tolerated object, an exempt namespace without a policy and a binding to an
allowed subject (the catalog's policy flags them), and look-alikes that stay violations.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from typing import Any

from itbench_ciso.checks import k8s
from itbench_ciso.checks.k8s import Factory, K8sCheck, add, deploy, pod
from itbench_ciso.checks.k8s_cluster import SYSTEM_NAMESPACES, Cluster, ident, meta, rule

Obj = dict[str, Any]


def _rego_set(values: list[str] | tuple[str, ...]) -> str:
    return "{" + ", ".join(json.dumps(v) for v in values) + "}"


def _patched(check: K8sCheck, old: str, new: str) -> str:
    """The check's reference policy with ``old`` replaced (it must be there once)."""
    if check.rego.count(old) != 1:
        raise ValueError(f"{check.id}: the reference policy no longer has {old!r}")
    return check.rego.replace(old, new)


# --- the default namespace --------------------------------------------------------------------

#: Objects an organization may tolerate in the default namespace (kind/name).
TOLERATED = (
    "ConfigMap/legacy-settings",
    "Service/ldap-proxy",
    "Role/ops-reader",
    "ConfigMap/cluster-contacts",
    "Service/metrics-bridge",
    "Role/ticket-bot",
)


def _object(kind: str, name: str, namespace: str = "default") -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        cl.namespace(namespace)
        o = meta(kind, name, namespace)
        if kind == "ConfigMap":
            o["data"] = {"owner": "platform-team", "ticket": "OPS-4410"}
        elif kind == "Service":
            o["spec"] = {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{cl.rng.randint(1, 250)}.{cl.rng.randint(2, 250)}",
                "ports": [{"port": 389, "targetPort": 389, "protocol": "TCP"}],
            }
        else:
            o["rules"] = [rule([""], ["configmaps"], ["get"])]
        return o

    return make


def _policy(namespace: str) -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        spec = {"podSelector": {}, "policyTypes": ["Ingress"]}
        return {**meta("NetworkPolicy", cl.unique("allow-dns"), namespace), "spec": spec}

    return make


def _swap(kind: str) -> str:
    return {"ConfigMap": "Service", "Service": "Role", "Role": "ConfigMap"}[kind]


def draw_tolerated(rng: random.Random) -> tuple[str, ...]:
    """Objects tolerated in the default namespace."""
    return tuple(rng.sample(TOLERATED, rng.choice((2, 3))))


def derive_tolerated(check: K8sCheck, values: tuple[str, ...]) -> K8sCheck:
    """Objects of the default namespace violate unless managed or tolerated."""
    ok = set(values)
    (k0, n0), (k1, n1) = (v.split("/", 1) for v in (values[0], values[-1]))
    other = next(v for v in TOLERATED if v not in ok).split("/", 1)
    bad: dict[str, Factory] = {
        "pod in default": pod(namespace="default"),
        f"unlisted {other[0]} {other[1]} in default": add(_object(other[0], other[1])),
        f"{n0}-v2 in default": add(_object(k0, f"{n0}-v2")),
        f"a {_swap(k1)} named {n1} in default": add(_object(_swap(k1), n1)),
        "deployment in default": deploy(namespace="default"),
    }
    near: dict[str, Factory] = {
        f"tolerated {k0} {n0}": add(_object(k0, n0)),
        f"tolerated {k1} {n1}": add(_object(k1, n1)),
        f"{other[0]} {other[1]} in another namespace": add(
            _object(other[0], other[1], "default-apps")
        ),
        "namespace default-apps": pod(namespace="default-apps"),
        "a network policy in default": add(_policy("default")),
    }
    rego = f"tolerated := {_rego_set(values)}\n\n" + _patched(
        check,
        "\tnot managed(o)\n}",
        '\tnot managed(o)\n\tnot tolerated[concat("/", [o.kind, o.metadata.name])]\n}',
    )

    def truth(objs: list[Obj]) -> set[str]:
        return {
            ident(o)
            for o in objs
            if check.truth([o]) and f"{o['kind']}/{o['metadata']['name']}" not in ok
        }

    return dataclasses.replace(check, rego=rego, truth=truth, bad=bad, near=near)


# --- network policies -------------------------------------------------------------------------

EXEMPT = ("legacy-batch", "sandbox", "ci-runners", "scratch", "data-import")


def _namespace(ns: str, policy: bool, app: bool = True) -> Factory:
    def apply(cl: Cluster) -> None:
        cl.namespace(ns, policy=policy)
        if app:
            cl.workload("Deployment", namespace=ns)

    return apply


def draw_exempt(rng: random.Random) -> tuple[str, ...]:
    """Namespaces exempt from the network-policy rule."""
    return tuple(rng.sample(EXEMPT, rng.choice((1, 2))))


def derive_exempt(check: K8sCheck, values: tuple[str, ...]) -> K8sCheck:
    """Namespaces without a policy violate unless system or exempt."""
    ok = set(values)
    e0, e1 = values[0], values[-1]
    other, spare = [n for n in EXEMPT if n not in ok][:2]
    base_bad = list(check.bad.items())
    base_near = list(check.near.items())
    bad: dict[str, Factory] = {
        base_bad[0][0]: base_bad[0][1],
        f"{e0}-staging without a policy": _namespace(f"{e0}-staging", False),
        f"unlisted {other} without a policy": _namespace(other, False),
        f"empty {other}-2 without a policy": _namespace(f"{other}-2", False, app=False),
        "default namespace without a policy": check.bad["default namespace without a policy"],
    }
    near: dict[str, Factory] = {
        base_near[0][0]: base_near[0][1],
        f"exempt {e0} without a policy": _namespace(e0, False),
        f"exempt {e1}, empty, without a policy": _namespace(e1, False, app=False),
        f"{spare} with a policy": _namespace(spare, True),
        "egress-only policy": check.near["egress-only policy"],
    }
    rego = f"exempt_namespaces := {_rego_set(values)}\n\n" + _patched(
        check,
        '\tnot o.metadata.name in {"kube-system", "kube-public", "kube-node-lease"}\n',
        '\tnot o.metadata.name in {"kube-system", "kube-public", "kube-node-lease"}\n'
        "\tnot exempt_namespaces[o.metadata.name]\n",
    )

    def truth(objs: list[Obj]) -> set[str]:
        covered = {o["metadata"].get("namespace") for o in objs if o["kind"] == "NetworkPolicy"}
        skip = set(SYSTEM_NAMESPACES) | ok | covered
        return {
            ident(o) for o in objs if o["kind"] == "Namespace" and o["metadata"]["name"] not in skip
        }

    return dataclasses.replace(check, rego=rego, truth=truth, bad=bad, near=near)


# --- cluster-admin ----------------------------------------------------------------------------

ADMINS = (
    "Group:sre-oncall",
    "Group:platform-admins",
    "User:breakglass@corp.example",
    "User:oncall-lead@corp.example",
    "Group:cluster-operators",
)
_API = "rbac.authorization.k8s.io"
_SA = {"kind": "ServiceAccount", "name": "ci-deployer", "namespace": "platform"}
_MASTERS = {"apiGroup": _API, "kind": "Group", "name": "system:masters"}


def _subject(token: str) -> dict[str, str]:
    kind, name = token.split(":", 1)
    return {"apiGroup": _API, "kind": kind, "name": name}


def _bound(kind: str, subjects: list[dict[str, str]], role: str = "cluster-admin") -> Factory:
    def make(cl: Cluster) -> Obj:
        ns = None if kind == "ClusterRoleBinding" else cl.app()[0]
        if ns is not None:
            cl.namespace(ns)
        return {
            **meta(kind, cl.unique(role), ns),
            "roleRef": {"apiGroup": _API, "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        }

    return add(make)


def draw_admins(rng: random.Random) -> tuple[str, ...]:
    """Subjects allowed to hold cluster-admin besides system:masters."""
    return tuple(rng.sample(ADMINS, rng.choice((1, 2))))


def derive_admins(check: K8sCheck, values: tuple[str, ...]) -> K8sCheck:
    """Bindings of cluster-admin to any subject but system:masters and the allowed ones."""
    ok = set(values)
    a0, a1 = _subject(values[0]), _subject(values[-1])
    other = _subject(next(v for v in ADMINS if v not in ok))
    swapped = {**a0, "kind": "User" if a0["kind"] == "Group" else "Group"}
    crb = "ClusterRoleBinding"
    bad: dict[str, Factory] = {
        "bound to a user": _bound(crb, [{"apiGroup": _API, "kind": "User", "name": "alice"}]),
        f"bound to unlisted {other['name']}": _bound(crb, [other]),
        f"{a0['name']} as a {swapped['kind']}": _bound(crb, [swapped]),
        f"listed {a1['name']} and a service account": _bound(crb, [a1, _SA]),
        f"namespaced binding to {a0['name']}-dev": _bound(
            "RoleBinding", [{**a0, "name": f"{a0['name']}-dev"}]
        ),
    }
    near: dict[str, Factory] = {
        "admin bound to a user": _bound(crb, [other], role="admin"),
        f"bound to listed {a0['name']}": _bound(crb, [a0]),
        f"namespaced binding to listed {a1['name']}": _bound("RoleBinding", [a1]),
        f"listed {a0['name']} with system:masters": _bound(crb, [_MASTERS, a0]),
        f"edit bound to unlisted {other['name']}": _bound("RoleBinding", [other], role="edit"),
    }
    rego = f"allowed_admins := {_rego_set(values)}\n\n" + _patched(
        check,
        "\tnot masters(s)\n}",
        '\tnot masters(s)\n\tnot allowed_admins[concat(":", [s.kind, s.name])]\n}',
    )

    def truth(objs: list[Obj]) -> set[str]:
        out = set()
        for o in objs:
            ref = o.get("roleRef") or {}
            if o["kind"] not in (crb, "RoleBinding") or ref.get("kind") != "ClusterRole":
                continue
            if ref.get("name") != "cluster-admin":
                continue
            for s in o.get("subjects") or []:
                masters = s.get("kind") == "Group" and s.get("name") == "system:masters"
                if not masters and f"{s.get('kind')}:{s.get('name')}" not in ok:
                    out.add(ident(o))
        return out

    return dataclasses.replace(check, rego=rego, truth=truth, bad=bad, near=near)


_ = k8s  # the checks these derive from live there
