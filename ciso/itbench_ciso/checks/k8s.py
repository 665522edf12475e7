"""Kubernetes checks (CIS Kubernetes Benchmark section 5 style) on cluster snapshots.

A snapshot is the document ``kubectl get`` prints for the cluster's namespaces, pods,
deployments, services, service accounts, config maps, network policies and RBAC objects
(:mod:`.k8s_cluster`). Every check has a ground truth over the whole snapshot (the identities
of the violating objects), violating mutations, near misses that comply, and a reference Rego
policy returning the violating objects. The first violating mutation and the first near miss
of a check are shown in the visible snapshot only; hidden snapshots use the others.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from itbench_ciso.checks.base import Check, Variant, rotated
from itbench_ciso.checks.k8s_cluster import (
    BOOTSTRAP,
    REGISTRY,
    SYSTEM_NAMESPACES,
    Cluster,
    Obj,
    containers_of,
    ident,
    meta,
    pod_spec_of,
    rule,
)
from itbench_ciso.checks.waivers import Waivers

__all__ = ["CHECKS", "REGISTRY", "K8sCheck", "by_id", "variants"]

Spec = dict[str, Any]
SpecFn = Callable[[Spec], None]
Factory = Callable[[Cluster], None]

#: Helpers every reference policy of this family uses.
HELPERS = """
ident(o) := {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), "name": o.metadata.name}

templated := {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

pod_spec(o) := o.spec if o.kind == "Pod"

pod_spec(o) := o.spec.template.spec if o.kind in templated

pod_spec(o) := o.spec.jobTemplate.spec.template.spec if o.kind == "CronJob"

containers(spec) := array.concat(
	array.concat(object.get(spec, "containers", []), object.get(spec, "initContainers", [])),
	object.get(spec, "ephemeralContainers", []),
)

bootstrapped(o) if o.metadata.labels["kubernetes.io/bootstrapping"] == "rbac-defaults"
"""


# --- pod spec mutations ------------------------------------------------------------------------


def _container(spec: Spec, which: str) -> dict[str, Any]:
    main: dict[str, Any] = spec["containers"][0]
    if which == "main":
        return main
    extra = copy.deepcopy(main)
    extra.pop("ports", None)
    if which == "sidecar":
        extra.update(name="log-shipper", image=f"{REGISTRY}/platform/log-shipper:2.3.1")
        spec["containers"].append(extra)
    elif which == "init":
        extra.update(name="init-schema", image=f"{REGISTRY}/platform/migrate:1.0.4")
        spec.setdefault("initContainers", []).append(extra)
    else:
        extra.pop("resources", None)
        extra.update(name="debugger", image=f"{REGISTRY}/platform/debug:1.2.0")
        extra["targetContainerName"] = main["name"]
        spec.setdefault("ephemeralContainers", []).append(extra)
    return extra


def on(which: str, *fns: Callable[[dict[str, Any]], None]) -> SpecFn:
    """Apply ``fns`` to a container: ``main``, or a new ``sidecar``, ``init`` or ``ephemeral``."""

    def apply(spec: Spec) -> None:
        c = _container(spec, which)
        for fn in fns:
            fn(c)

    return apply


def on_all(*fns: Callable[[dict[str, Any]], None]) -> SpecFn:
    """Apply ``fns`` to every container of the spec."""

    def apply(spec: Spec) -> None:
        for c in containers_of(spec):
            for fn in fns:
                fn(c)

    return apply


def _assign(target: dict[str, Any], values: dict[str, Any]) -> None:
    """Set the fields of ``values`` in ``target``; a None value removes the field."""
    for k, v in values.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v


def sc(**values: Any) -> Callable[[dict[str, Any]], None]:
    """Set (value) or remove (None) fields of a container's securityContext."""
    return lambda c: _assign(c.setdefault("securityContext", {}), values)


def psc(**values: Any) -> SpecFn:
    """Set (value) or remove (None) fields of the pod's securityContext."""
    return lambda spec: _assign(spec.setdefault("securityContext", {}), values)


def spec_set(**values: Any) -> SpecFn:
    """Set (value) or remove (None) fields of the pod spec."""
    return lambda spec: _assign(spec, values)


def field_set(**values: Any) -> Callable[[dict[str, Any]], None]:
    """Set (value) or remove (None) fields of a container."""
    return lambda c: _assign(c, values)


def caps(add: list[str] | None = None, drop: list[str] | None = None) -> Callable[..., None]:
    """Set a container's capabilities (None leaves a list out)."""

    def apply(c: dict[str, Any]) -> None:
        cap: dict[str, Any] = {}
        if add is not None:
            cap["add"] = add
        if drop is not None:
            cap["drop"] = drop
        c.setdefault("securityContext", {})["capabilities"] = cap

    return apply


def volume(vol: dict[str, Any]) -> SpecFn:
    """Add a volume."""

    def apply(spec: Spec) -> None:
        spec.setdefault("volumes", []).append(vol)

    return apply


def env(entry: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Add an environment entry to a container."""

    def apply(c: dict[str, Any]) -> None:
        c.setdefault("env", []).append(entry)

    return apply


def env_from(entry: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Add an envFrom source to a container."""

    def apply(c: dict[str, Any]) -> None:
        c.setdefault("envFrom", []).append(entry)

    return apply


def both(*fns: SpecFn) -> SpecFn:
    """Several spec mutations in order."""

    def apply(spec: Spec) -> None:
        for fn in fns:
            fn(spec)

    return apply


def pod(*fns: SpecFn, namespace: str | None = None) -> Factory:
    """A new application whose bare pod gets ``fns``."""
    return lambda cl: _ignore(cl.workload("Pod", both(*fns), namespace))


def deploy(*fns: SpecFn, namespace: str | None = None) -> Factory:
    """A new application whose deployment template (and replica pod) gets ``fns``."""
    return lambda cl: _ignore(cl.workload("Deployment", both(*fns), namespace))


def cron(*fns: SpecFn, namespace: str | None = None) -> Factory:
    """A new application whose cron job's pod template gets ``fns``."""
    return lambda cl: _ignore(cl.workload("CronJob", both(*fns), namespace))


def _ignore(_: Any) -> None:
    return None


def add(*objs: Callable[[Cluster], Obj]) -> Factory:
    """Factories of whole objects (each receives the cluster, returns the object)."""

    def apply(cl: Cluster) -> None:
        for make in objs:
            cl.add(make(cl))

    return apply


# --- ground truths ---------------------------------------------------------------------------


Truth = Callable[[list[Obj]], set[str]]


def per_workload(pred: Callable[[Obj, Spec], bool]) -> Truth:
    """Objects with a pod spec (pods, workload templates) for which ``pred`` holds."""

    def truth(objs: list[Obj]) -> set[str]:
        out = set()
        for o in objs:
            spec = pod_spec_of(o)
            if spec is not None and pred(o, spec):
                out.add(ident(o))
        return out

    return truth


def any_container(pred: Callable[[dict[str, Any]], bool]) -> Truth:
    """Objects with a container for which ``pred`` holds."""
    return per_workload(lambda o, spec: any(pred(c) for c in containers_of(spec)))


def _sc(c: dict[str, Any]) -> dict[str, Any]:
    return c.get("securityContext") or {}


def _effective(spec: Spec, c: dict[str, Any], key: str) -> Any:
    if key in _sc(c):
        return _sc(c)[key]
    return (spec.get("securityContext") or {}).get(key)


def _caps(c: dict[str, Any], which: str) -> list[str]:
    return list((_sc(c).get("capabilities") or {}).get(which) or [])


def unpinned(image: str) -> bool:
    """No digest, and no tag or the tag ``latest``."""
    if "@" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    return ":" not in last or last.endswith(":latest")


def _custom_roles(objs: list[Obj]) -> list[Obj]:
    return [
        o
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
        and (o["metadata"].get("labels") or {}).get("kubernetes.io/bootstrapping")
        != "rbac-defaults"
    ]


def rbac_grants(resource: str, verbs: set[str], group: str = "") -> Truth:
    """Custom roles with a rule granting one of ``verbs`` on ``resource`` of ``group``."""

    def truth(objs: list[Obj]) -> set[str]:
        out = set()
        for o in _custom_roles(objs):
            for r in o.get("rules") or []:
                groups = set(r.get("apiGroups") or [])
                res = set(r.get("resources") or [])
                vs = set(r.get("verbs") or [])
                if (
                    (group in groups or "*" in groups)
                    and (resource in res or "*" in res)
                    and (vs & verbs or "*" in vs)
                ):
                    out.add(ident(o))
        return out

    return truth


# --- the check -------------------------------------------------------------------------------


@dataclass(frozen=True)
class K8sCheck(Check):
    """A Kubernetes check.

    Attributes:
        truth: The identities of the violating objects of a snapshot's items.
        bad: Named factories that add a violation to a clean cluster (the first is shown in
            the visible snapshot only).
        near: Named factories that add something close to a violation that complies (the
            first is shown in the visible snapshot only).
    """

    family: ClassVar[str] = "kubernetes"
    truth: Truth = field(default=lambda objs: set())
    bad: dict[str, Factory] = field(default_factory=dict)
    near: dict[str, Factory] = field(default_factory=dict)

    def policy(self, package: str = "compliance") -> str:
        """The reference policy with the family's helpers."""
        body = f"{HELPERS.strip()}\n\n{self.rego.strip()}"
        return f"package {package}\n\nimport rego.v1\n\n{body}\n"


def _wl(cond: str) -> str:
    return f"violations contains ident(o) if {{\n\tsome o in input.items\n\tspec := pod_spec(o)\n{cond}\n}}"


def _ctr(cond: str) -> str:
    return _wl(f"\tsome c in containers(spec)\n{cond}")


#: Rego for an image not pinned: neither a digest nor a tag other than ``latest``.
UNPINNED_REGO = """

last_part(image) := parts[count(parts) - 1] if parts := split(image, "/")

unpinned(image) if {
	not contains(image, "@")
	not contains(last_part(image), ":")
}

unpinned(image) if {
	not contains(image, "@")
	endswith(last_part(image), ":latest")
}"""


def _roles(cond: str) -> str:
    return (
        "violations contains ident(o) if {\n\tsome o in input.items\n"
        '\to.kind in {"Role", "ClusterRole"}\n\tnot bootstrapped(o)\n\tsome r in o.rules\n'
        f"{cond}\n}}"
    )


def _grants(resource: str, verbs: list[str], group: str = "") -> str:
    allowed = ", ".join(f'"{v}"' for v in [*verbs, "*"])
    return _roles(
        f'\tsome g in r.apiGroups\n\tg in {{"{group}", "*"}}\n'
        f'\tsome res in r.resources\n\tres in {{"{resource}", "*"}}\n'
        f"\tsome v in r.verbs\n\tv in {{{allowed}}}"
    )


_HOSTNS = ("hostNetwork", "hostPID", "hostIPC")
_SECRET_KEY = re.compile(r"(password|passwd|secret|token|apikey)$")


def _configmap_secret(value: str) -> bool:
    return bool(
        re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", value)
        or re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", value)
        or re.search(r"://[^/\s:@]+:[^/\s@]+@", value)
    )


def _configmap_truth(objs: list[Obj]) -> set[str]:
    out = set()
    for o in objs:
        if o["kind"] != "ConfigMap":
            continue
        for k, v in (o.get("data") or {}).items():
            norm = re.sub(r"[^a-z]", "", k.lower())
            if (_SECRET_KEY.search(norm) and v) or _configmap_secret(str(v)):
                out.add(ident(o))
    return out


def _netpol_truth(objs: list[Obj]) -> set[str]:
    covered = {o["metadata"].get("namespace") for o in objs if o["kind"] == "NetworkPolicy"}
    return {
        ident(o)
        for o in objs
        if o["kind"] == "Namespace"
        and o["metadata"]["name"] not in SYSTEM_NAMESPACES
        and o["metadata"]["name"] not in covered
    }


_DEFAULT_OK = {
    ("Service", "kubernetes"),
    ("ServiceAccount", "default"),
    ("ConfigMap", "kube-root-ca.crt"),
}


def _default_ns_truth(objs: list[Obj]) -> set[str]:
    return {
        ident(o)
        for o in objs
        if o["metadata"].get("namespace") == "default"
        and (o["kind"], o["metadata"]["name"]) not in _DEFAULT_OK
        and o["kind"] != "NetworkPolicy"
    }


def _automount_truth(objs: list[Obj]) -> set[str]:
    sas = {
        (o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objs
        if o["kind"] == "ServiceAccount"
    }

    def mounted(o: Obj, spec: Spec) -> bool:
        if "automountServiceAccountToken" in spec:
            return spec["automountServiceAccountToken"] is not False
        sa = sas.get((o["metadata"].get("namespace"), spec.get("serviceAccountName", "default")))
        return (sa or {}).get("automountServiceAccountToken") is not False

    return per_workload(mounted)(objs)


def _cluster_admin_truth(objs: list[Obj]) -> set[str]:
    out = set()
    for o in objs:
        if o["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = o.get("roleRef") or {}
        if ref.get("kind") != "ClusterRole" or ref.get("name") != "cluster-admin":
            continue
        for s in o.get("subjects") or []:
            if not (s.get("kind") == "Group" and s.get("name") == "system:masters"):
                out.add(ident(o))
    return out


def _wildcard_truth(objs: list[Obj]) -> set[str]:
    out = set()
    for o in _custom_roles(objs):
        for r in o.get("rules") or []:
            lists = ("apiGroups", "resources", "verbs", "nonResourceURLs")
            if any("*" in (r.get(k) or []) for k in lists):
                out.add(ident(o))
    return out


def _escalation_truth(objs: list[Obj]) -> set[str]:
    out = set()
    for o in _custom_roles(objs):
        for r in o.get("rules") or []:
            if set(r.get("verbs") or []) & {"bind", "escalate", "impersonate", "*"}:
                out.add(ident(o))
    return out


def _binding(
    kind: str, role_kind: str, role: str, subjects: list[dict[str, str]]
) -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        ns = None if kind == "ClusterRoleBinding" else cl.app()[0]
        if ns is not None:
            cl.namespace(ns)
        return {
            **meta(kind, cl.unique(role.replace(":", "-")), ns),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": subjects,
        }

    return make


def _role(kind: str, base: str, *rules: Obj) -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        ns = None if kind == "ClusterRole" else cl.app()[0]
        if ns is not None:
            cl.namespace(ns)
        return {**meta(kind, cl.unique(base), ns), "rules": list(rules)}

    return make


def grant(kind: str, base: str, *rule_args: Any, **rule_fields: Any) -> Factory:
    """A new Role or ClusterRole with one rule (``rule``'s arguments)."""
    return add(_role(kind, base, rule(*rule_args, **rule_fields)))


def _service(kind: str = "ClusterIP", **spec: Any) -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        ns, app, _ = cl.app()
        cl.namespace(ns)
        body: dict[str, Any] = {
            "type": kind,
            "selector": {"app": app},
            "ports": [{"port": 443, "targetPort": 8443, "protocol": "TCP"}],
        }
        if kind != "ExternalName":
            body["clusterIP"] = f"10.96.{cl.rng.randint(1, 250)}.{cl.rng.randint(2, 250)}"
        body.update(spec)
        return {**meta("Service", cl.unique(app), ns), "spec": body}

    return make


def _configmap(data: dict[str, str], namespace: str | None = None) -> Callable[[Cluster], Obj]:
    def make(cl: Cluster) -> Obj:
        ns, app, _ = cl.app()
        ns = namespace or ns
        cl.namespace(ns)
        return {**meta("ConfigMap", cl.unique(f"{app}-settings"), ns), "data": dict(data)}

    return make


def _new_namespace(policy: dict[str, Any] | None, with_app: bool = True) -> Factory:
    def apply(cl: Cluster) -> None:
        ns = cl.unique("team")
        cl.namespace(ns, policy=False)
        if policy is not None:
            cl.add({**meta("NetworkPolicy", cl.unique("policy"), ns), "spec": policy})
        if with_app:
            cl.workload("Deployment", namespace=ns)

    return apply


def _drop_policy(ns: str) -> Factory:
    def apply(cl: Cluster) -> None:
        cl.namespace(ns)
        cl.remove("NetworkPolicy", ns)

    return apply


def _in_default(kind: str) -> Factory:
    def apply(cl: Cluster) -> None:
        if kind in ("Pod", "Deployment"):
            cl.workload(kind, namespace="default")
        elif kind == "ConfigMap":
            cl.add(_configmap({"MODE": "batch"}, "default")(cl))
        elif kind == "Service":
            svc = _service()(cl)
            svc["metadata"]["namespace"] = "default"
            cl.add(svc)
        else:
            cl.add(
                {
                    **meta("Role", cl.unique("ops"), "default"),
                    "rules": [rule([""], ["pods"], ["get"])],
                }
            )

    return apply


_PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAvQ9Jx3hK\n-----END RSA PRIVATE KEY-----\n"
_CERT = "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTAN\n-----END CERTIFICATE-----\n"
_SA = {"kind": "ServiceAccount", "name": "ci-deployer", "namespace": "platform"}
_USER = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice@corp.example"}
_GROUP = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "platform-devs"}
_MASTERS = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}


def _sa_automount(value: bool | None, pod_value: bool | None, kind: str = "Pod") -> Factory:
    """A workload and its new service account with the given automount fields (None: absent).

    ``pod_value`` is the workload's own field, ``value`` the service account's.
    """

    def apply(cl: Cluster) -> None:
        name = cl.unique("runner")

        def fn(spec: Spec) -> None:
            spec["serviceAccountName"] = name
            if pod_value is None:
                spec.pop("automountServiceAccountToken", None)
            else:
                spec["automountServiceAccountToken"] = pod_value

        wl = cl.workload(kind, fn)
        cl.service_account(wl["metadata"]["namespace"], name, value)

    return apply


CHECKS: list[K8sCheck] = [
    K8sCheck(
        id="k8s-host-namespaces",
        title="Minimize the admission of containers sharing host namespaces",
        requirement=(
            "Minimize the admission of containers wishing to share the host's namespaces. "
            "No workload (a pod, or the pod template of a deployment or other controller) may "
            "share the host's process ID, IPC or network namespace."
        ),
        rego="\n\n".join(_wl(f"\tspec.{f} == true") for f in _HOSTNS),
        truth=per_workload(lambda o, s: any(s.get(f) is True for f in _HOSTNS)),
        bad={
            "hostNetwork pod": pod(spec_set(hostNetwork=True)),
            "hostPID deployment": deploy(spec_set(hostPID=True)),
            "hostIPC pod": pod(spec_set(hostIPC=True)),
            "hostNetwork deployment": deploy(
                spec_set(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
            ),
            "hostPID pod": pod(spec_set(hostPID=True)),
        },
        near={
            "all three false": pod(spec_set(hostNetwork=False, hostPID=False, hostIPC=False)),
            "shareProcessNamespace": deploy(spec_set(shareProcessNamespace=True)),
            "dnsPolicy ClusterFirstWithHostNet": pod(spec_set(dnsPolicy="ClusterFirstWithHostNet")),
            "memory-backed /dev/shm": deploy(
                volume({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}})
            ),
            "hostAliases": pod(spec_set(hostAliases=[{"ip": "10.0.0.5", "hostnames": ["db"]}])),
        },
    ),
    K8sCheck(
        id="k8s-privileged",
        title="Minimize the admission of privileged containers",
        requirement=(
            "Minimize the admission of privileged containers. No container of any workload (a "
            "pod, or the pod template of a deployment or other controller) may run privileged."
        ),
        rego=_ctr("\tc.securityContext.privileged == true"),
        truth=any_container(lambda c: _sc(c).get("privileged") is True),
        bad={
            "privileged container": pod(on("main", sc(privileged=True))),
            "privileged init container": deploy(on("init", sc(privileged=True))),
            "privileged sidecar": pod(on("sidecar", sc(privileged=True))),
            "privileged ephemeral container": pod(on("ephemeral", sc(privileged=True))),
            "privileged deployment container": deploy(on("main", sc(privileged=True))),
        },
        near={
            "privileged field absent": pod(on("main", sc(privileged=None))),
            "SYS_ADMIN added but not privileged": deploy(on("main", caps(add=["SYS_ADMIN"]))),
            "annotation mentions privileged": pod(
                spec_set(priorityClassName="privileged-workloads")
            ),
            "escalation allowed, not privileged": deploy(
                on("sidecar", sc(allowPrivilegeEscalation=True))
            ),
            "init container explicitly unprivileged": pod(on("init", sc(privileged=False))),
        },
    ),
    K8sCheck(
        id="k8s-privilege-escalation",
        title="Minimize the admission of containers with allowPrivilegeEscalation",
        requirement=(
            "Minimize the admission of containers with allowPrivilegeEscalation. Every "
            "container of every workload must have allowPrivilegeEscalation set to false."
        ),
        rego=_ctr("\tnot c.securityContext.allowPrivilegeEscalation == false"),
        truth=any_container(lambda c: _sc(c).get("allowPrivilegeEscalation") is not False),
        bad={
            "allowPrivilegeEscalation true": pod(on("main", sc(allowPrivilegeEscalation=True))),
            "init container without the field": deploy(
                on("init", sc(allowPrivilegeEscalation=None))
            ),
            "sidecar without the field": pod(on("sidecar", sc(allowPrivilegeEscalation=None))),
            "ephemeral container without the field": pod(
                on("ephemeral", sc(allowPrivilegeEscalation=None))
            ),
            "deployment container true": deploy(on("main", sc(allowPrivilegeEscalation=True))),
        },
        near={
            "sidecar explicitly false": pod(on("sidecar", sc(allowPrivilegeEscalation=False))),
            "init container explicitly false": deploy(
                on("init", sc(allowPrivilegeEscalation=False))
            ),
            "privileged false everywhere": pod(on_all(sc(privileged=False))),
            "no capabilities dropped": deploy(on("main", caps())),
            "runs as UID 0 without escalation": pod(on("main", sc(runAsUser=0))),
        },
    ),
    K8sCheck(
        id="k8s-run-as-non-root",
        title="Minimize the admission of root containers",
        requirement=(
            "Minimize the admission of root containers. Every container of every workload "
            "must run with runAsNonRoot in effect and must not run as user ID 0."
        ),
        rego=_ctr("\troot_user(spec, c)")
        + """

has_ctr(c, key) if {
	_ = c.securityContext[key]
}

nonroot(spec, c) if c.securityContext.runAsNonRoot == true

nonroot(spec, c) if {
	not has_ctr(c, "runAsNonRoot")
	spec.securityContext.runAsNonRoot == true
}

uid(spec, c) := c.securityContext.runAsUser

uid(spec, c) := spec.securityContext.runAsUser if not has_ctr(c, "runAsUser")

root_user(spec, c) if not nonroot(spec, c)

root_user(spec, c) if uid(spec, c) == 0""",
        truth=per_workload(
            lambda o, s: any(
                _effective(s, c, "runAsNonRoot") is not True or _effective(s, c, "runAsUser") == 0
                for c in containers_of(s)
            )
        ),
        bad={
            "pod runAsNonRoot absent": pod(psc(runAsNonRoot=None)),
            "container overrides runAsNonRoot false": deploy(on("main", sc(runAsNonRoot=False))),
            "sidecar runAsUser 0": pod(on("sidecar", sc(runAsUser=0))),
            "pod runAsUser 0": deploy(psc(runAsUser=0)),
            "init container runAsNonRoot false": pod(on("init", sc(runAsNonRoot=False))),
        },
        near={
            "set on the container instead of the pod": pod(
                psc(runAsNonRoot=None), on("main", sc(runAsNonRoot=True))
            ),
            "container runAsUser 1000": deploy(on("main", sc(runAsUser=1000))),
            "every container sets it, pod does not": deploy(
                on("init", sc(runAsNonRoot=True)),
                psc(runAsNonRoot=None),
                on_all(sc(runAsNonRoot=True)),
            ),
            "runAsGroup 0": pod(psc(runAsGroup=0)),
            "pod runAsUser 0 overridden by every container": pod(
                psc(runAsUser=0), on_all(sc(runAsUser=2000))
            ),
        },
    ),
    K8sCheck(
        id="k8s-added-capabilities",
        title="Minimize the admission of containers with added capabilities",
        requirement=(
            "Minimize the admission of containers with added capabilities. No container of "
            "any workload may add a Linux capability other than NET_BIND_SERVICE."
        ),
        rego=_ctr('\tsome cap in c.securityContext.capabilities.add\n\tcap != "NET_BIND_SERVICE"'),
        truth=any_container(lambda c: any(x != "NET_BIND_SERVICE" for x in _caps(c, "add"))),
        bad={
            "adds NET_ADMIN": pod(on("main", caps(add=["NET_ADMIN"], drop=["ALL"]))),
            "init container adds SYS_ADMIN": deploy(on("init", caps(add=["SYS_ADMIN"]))),
            "adds NET_BIND_SERVICE and SYS_PTRACE": pod(
                on("sidecar", caps(add=["NET_BIND_SERVICE", "SYS_PTRACE"], drop=["ALL"]))
            ),
            "ephemeral container adds NET_RAW": pod(on("ephemeral", caps(add=["NET_RAW"]))),
            "deployment adds CAP_SYS_TIME": deploy(on("main", caps(add=["CAP_SYS_TIME"]))),
        },
        near={
            "adds NET_BIND_SERVICE": pod(on("main", caps(add=["NET_BIND_SERVICE"], drop=["ALL"]))),
            "drops NET_ADMIN": deploy(on("main", caps(drop=["NET_ADMIN", "SYS_ADMIN"]))),
            "init adds NET_BIND_SERVICE": deploy(on("init", caps(add=["NET_BIND_SERVICE"]))),
            "empty add list": pod(on("sidecar", caps(add=[], drop=["ALL"]))),
            "privileged false": pod(on("main", sc(privileged=False))),
        },
    ),
    K8sCheck(
        id="k8s-capabilities-drop-all",
        title="Minimize the admission of containers with capabilities assigned",
        requirement=(
            "Minimize the admission of containers with capabilities assigned. Every container "
            "of every workload must drop all capabilities and add none."
        ),
        rego=_ctr('\tcount(object.get(c, ["securityContext", "capabilities", "add"], [])) > 0')
        + "\n\n"
        + _ctr('\tnot "ALL" in object.get(c, ["securityContext", "capabilities", "drop"], [])'),
        truth=any_container(lambda c: bool(_caps(c, "add")) or "ALL" not in _caps(c, "drop")),
        bad={
            "adds NET_BIND_SERVICE": pod(on("main", caps(add=["NET_BIND_SERVICE"], drop=["ALL"]))),
            "drops only NET_RAW": deploy(on("sidecar", caps(drop=["NET_RAW"]))),
            "init container drops nothing": deploy(on("init", caps())),
            "ephemeral container drops nothing": pod(on("ephemeral", caps())),
            "capabilities absent on the main container": pod(on("main", sc(capabilities=None))),
        },
        near={
            "drops ALL and NET_RAW": pod(on("main", caps(drop=["ALL", "NET_RAW"]))),
            "drops NET_RAW then ALL": deploy(on("main", caps(drop=["NET_RAW", "ALL"]))),
            "empty add list": pod(on("main", caps(add=[], drop=["ALL"]))),
            "init container drops ALL": deploy(on("init", caps(drop=["ALL"]))),
            "sidecar drops ALL": pod(on("sidecar", caps(drop=["ALL"]))),
        },
    ),
    K8sCheck(
        id="k8s-host-path",
        title="Minimize the admission of HostPath volumes",
        requirement=(
            "Minimize the admission of HostPath volumes. No workload may mount a volume of "
            "type hostPath."
        ),
        rego=_wl("\tsome v in spec.volumes\n\tv.hostPath"),
        truth=per_workload(lambda o, s: any("hostPath" in v for v in s.get("volumes") or [])),
        bad={
            "docker socket": pod(
                volume({"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}})
            ),
            "host /var/log in a deployment": deploy(
                volume({"name": "varlog", "hostPath": {"path": "/var/log", "type": "Directory"}})
            ),
            "host root": pod(volume({"name": "host", "hostPath": {"path": "/"}})),
            "containerd socket in a deployment": deploy(
                volume(
                    {
                        "name": "cri",
                        "hostPath": {"path": "/run/containerd/containerd.sock", "type": "Socket"},
                    }
                )
            ),
        },
        near={
            "PVC named hostpath-data": pod(
                volume({"name": "hostpath-data", "persistentVolumeClaim": {"claimName": "data"}})
            ),
            "configMap volume": deploy(volume({"name": "cfg", "configMap": {"name": "settings"}})),
            "memory emptyDir": pod(volume({"name": "cache", "emptyDir": {"medium": "Memory"}})),
            "projected token": deploy(
                volume(
                    {
                        "name": "token",
                        "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
                    }
                )
            ),
            "CSI ephemeral volume": pod(
                volume({"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io"}})
            ),
        },
    ),
    K8sCheck(
        id="k8s-seccomp",
        title="Ensure that the seccomp profile is set to RuntimeDefault in pod definitions",
        requirement=(
            "Ensure that the seccomp profile is set in your pod definitions. Every container of "
            "every workload must run under the RuntimeDefault seccomp profile or a Localhost "
            "profile."
        ),
        rego=_ctr('\tnot seccomp(spec, c) in {"RuntimeDefault", "Localhost"}')
        + """

seccomp(spec, c) := c.securityContext.seccompProfile.type

seccomp(spec, c) := spec.securityContext.seccompProfile.type if {
	not c.securityContext.seccompProfile
}""",
        truth=per_workload(
            lambda o, s: any(
                (_effective(s, c, "seccompProfile") or {}).get("type")
                not in ("RuntimeDefault", "Localhost")
                for c in containers_of(s)
            )
        ),
        bad={
            "no profile anywhere": pod(psc(seccompProfile=None)),
            "sidecar Unconfined overrides the pod": deploy(
                on("sidecar", sc(seccompProfile={"type": "Unconfined"}))
            ),
            "pod Unconfined": pod(psc(seccompProfile={"type": "Unconfined"})),
            "init container Unconfined": deploy(
                on("init", sc(seccompProfile={"type": "Unconfined"}))
            ),
            "deployment without a profile, one container sets it": deploy(
                psc(seccompProfile=None),
                on("main", sc(seccompProfile={"type": "RuntimeDefault"})),
                on("sidecar", sc(seccompProfile=None)),
            ),
        },
        near={
            "set on the only container": pod(
                psc(seccompProfile=None), on("main", sc(seccompProfile={"type": "RuntimeDefault"}))
            ),
            "Localhost profile": deploy(
                psc(seccompProfile={"type": "Localhost", "localhostProfile": "profiles/audit.json"})
            ),
            "pod Unconfined, every container RuntimeDefault": pod(
                psc(seccompProfile={"type": "Unconfined"}),
                on("init", sc(seccompProfile={"type": "RuntimeDefault"})),
                on_all(sc(seccompProfile={"type": "RuntimeDefault"})),
            ),
            "container Localhost under a RuntimeDefault pod": deploy(
                on("main", sc(seccompProfile={"type": "Localhost", "localhostProfile": "a.json"}))
            ),
            "AppArmor profile set too": pod(
                on("main", sc(appArmorProfile={"type": "RuntimeDefault"}))
            ),
        },
    ),
    K8sCheck(
        id="k8s-default-namespace",
        title="The default namespace should not be used",
        requirement=(
            "The default namespace should not be used. Apart from what Kubernetes itself "
            "manages there (the kubernetes service, the default service account, the "
            "kube-root-ca.crt config map and the namespace's network policy), no object may be "
            "created in the namespace default."
        ),
        rego="""violations contains ident(o) if {
	some o in input.items
	o.metadata.namespace == "default"
	not managed(o)
}

managed(o) if [o.kind, o.metadata.name] in {
	["Service", "kubernetes"],
	["ServiceAccount", "default"],
	["ConfigMap", "kube-root-ca.crt"],
}

managed(o) if o.kind == "NetworkPolicy\"""",
        truth=_default_ns_truth,
        bad={
            "pod in default": _in_default("Pod"),
            "deployment in default": _in_default("Deployment"),
            "config map in default": _in_default("ConfigMap"),
            "service in default": _in_default("Service"),
            "role in default": _in_default("Role"),
        },
        near={
            "namespace default-apps": pod(namespace="default-apps"),
            "namespace kube-default": deploy(namespace="kube-default"),
            "cluster role (no namespace)": grant(
                "ClusterRole", "default-reader", [""], ["pods"], ["get"]
            ),
            "binding to a subject of namespace default": add(
                _binding(
                    "RoleBinding",
                    "Role",
                    "viewer",
                    [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
                )
            ),
            "service account named default elsewhere": pod(
                spec_set(serviceAccountName="default-sa")
            ),
        },
    ),
    K8sCheck(
        id="k8s-automount-token",
        title="Ensure that Service Account Tokens are only mounted where necessary",
        requirement=(
            "Ensure that Service Account Tokens are only mounted where necessary. No workload "
            "may have a service account token mounted automatically: the pod's "
            "automountServiceAccountToken, or its service account's when the pod does not set "
            "it, must be false."
        ),
        rego="""violations contains ident(o) if {
	some o in input.items
	spec := pod_spec(o)
	not automount_off(o, spec)
}

automount_off(o, spec) if spec.automountServiceAccountToken == false

automount_off(o, spec) if {
	not "automountServiceAccountToken" in object.keys(spec)
	some sa in input.items
	sa.kind == "ServiceAccount"
	sa.metadata.namespace == o.metadata.namespace
	sa.metadata.name == object.get(spec, "serviceAccountName", "default")
	sa.automountServiceAccountToken == false
}""",
        truth=_automount_truth,
        bad={
            "pod and account both silent": _sa_automount(None, None),
            "pod true": pod(spec_set(automountServiceAccountToken=True)),
            "deployment silent, account true": _sa_automount(True, None, "Deployment"),
            "deployment true overrides the account's false": _sa_automount(
                False, True, "Deployment"
            ),
            "pod silent on the default account": pod(
                spec_set(serviceAccountName=None, automountServiceAccountToken=None)
            ),
        },
        near={
            "account false, pod silent": _sa_automount(False, None),
            "pod false overrides the account's true": _sa_automount(True, False),
            "deployment silent, account false": _sa_automount(False, None, "Deployment"),
            "pod false on a silent account": _sa_automount(None, False, "Deployment"),
            "projected token volume but automount off": pod(
                volume(
                    {
                        "name": "token",
                        "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]},
                    }
                )
            ),
        },
    ),
    K8sCheck(
        id="k8s-image-tag",
        title="Container images must be pinned",
        requirement=(
            "Container images must be pinned to a version. Every container image of every "
            "workload must be referenced by digest or by a tag other than latest."
        ),
        rego=_ctr("\tunpinned(c.image)") + UNPINNED_REGO,
        truth=any_container(lambda c: unpinned(c["image"])),
        bad={
            "latest tag": pod(on("main", field_set(image=f"{REGISTRY}/shop/cart:latest"))),
            "no tag behind a registry port": deploy(
                on("sidecar", field_set(image="registry.corp.example:5000/ops/agent"))
            ),
            "init container untagged": pod(on("init", field_set(image="busybox"))),
            "ephemeral container latest": pod(on("ephemeral", field_set(image="alpine:latest"))),
            "deployment untagged": deploy(on("main", field_set(image=f"{REGISTRY}/shop/cart"))),
        },
        near={
            "registry port with a tag": pod(
                on("main", field_set(image="registry.corp.example:5000/shop/cart:4.1.0"))
            ),
            "digest": deploy(
                on("main", field_set(image=f"{REGISTRY}/shop/cart@sha256:" + "3f" * 32))
            ),
            "tag latest-stable": pod(
                on("sidecar", field_set(image=f"{REGISTRY}/ops/agent:latest-stable"))
            ),
            "latest tag with a digest": deploy(
                on("main", field_set(image=f"{REGISTRY}/shop/cart:latest@sha256:" + "a1" * 32))
            ),
            "tag v1-latest": pod(on("init", field_set(image="busybox:v1-latest"))),
        },
    ),
    K8sCheck(
        id="k8s-resource-limits",
        title="Containers must set CPU and memory limits",
        requirement=(
            "Resource limits are mandatory. Every container and init container of every "
            "workload must set both a CPU limit and a memory limit."
        ),
        rego=_wl(
            '\tsome c in array.concat(object.get(spec, "containers", []), '
            'object.get(spec, "initContainers", []))\n\tnot limited(c)'
        )
        + "\n\nlimited(c) if {\n\tc.resources.limits.cpu\n\tc.resources.limits.memory\n}",
        truth=per_workload(
            lambda o, s: any(
                not ((c.get("resources") or {}).get("limits") or {}).get("cpu")
                or not ((c.get("resources") or {}).get("limits") or {}).get("memory")
                for c in [*s.get("containers", []), *s.get("initContainers", [])]
            )
        ),
        bad={
            "no limits": pod(on("main", field_set(resources={"requests": {"cpu": "100m"}}))),
            "memory limit missing": deploy(
                on("sidecar", field_set(resources={"limits": {"cpu": "200m"}}))
            ),
            "init container without resources": deploy(on("init", field_set(resources=None))),
            "cpu limit missing": pod(
                on("main", field_set(resources={"limits": {"memory": "1Gi"}}))
            ),
            "empty limits": deploy(on("main", field_set(resources={"limits": {}}))),
        },
        near={
            "limits without requests": pod(
                on("main", field_set(resources={"limits": {"cpu": "1", "memory": "1Gi"}}))
            ),
            "numeric cpu limit": deploy(
                on("main", field_set(resources={"limits": {"cpu": 2, "memory": "2Gi"}}))
            ),
            "extended resource too": pod(
                on(
                    "main",
                    field_set(
                        resources={"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}
                    ),
                )
            ),
            "init container with limits": deploy(on("init")),
            "ephemeral container (no resources allowed)": pod(on("ephemeral")),
        },
    ),
    K8sCheck(
        id="k8s-secret-env",
        title="Prefer using secrets as files over secrets as environment variables",
        requirement=(
            "Prefer using Secrets as files over Secrets as environment variables. No container "
            "of any workload may take a value from a Secret into its environment."
        ),
        rego=_ctr("\tsome e in c.env\n\te.valueFrom.secretKeyRef")
        + "\n\n"
        + _ctr("\tsome f in c.envFrom\n\tf.secretRef"),
        truth=any_container(
            lambda c: (
                any((e.get("valueFrom") or {}).get("secretKeyRef") for e in c.get("env") or [])
                or any(f.get("secretRef") for f in c.get("envFrom") or [])
            )
        ),
        bad={
            "secretKeyRef": pod(
                on(
                    "main",
                    env(
                        {
                            "name": "DB_PASSWORD",
                            "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                        }
                    ),
                )
            ),
            "envFrom secretRef": deploy(
                on("sidecar", env_from({"secretRef": {"name": "api-keys"}}))
            ),
            "init container secretKeyRef": deploy(
                on(
                    "init",
                    env(
                        {
                            "name": "MIGRATE_DSN",
                            "valueFrom": {"secretKeyRef": {"name": "db", "key": "dsn"}},
                        }
                    ),
                )
            ),
            "envFrom secretRef with a prefix": pod(
                on(
                    "main",
                    env_from({"prefix": "APP_", "secretRef": {"name": "app", "optional": True}}),
                )
            ),
        },
        near={
            "configMapKeyRef": pod(
                on(
                    "main",
                    env(
                        {
                            "name": "DB_HOST",
                            "valueFrom": {"configMapKeyRef": {"name": "db", "key": "host"}},
                        }
                    ),
                )
            ),
            "literal named SECRET_MODE": deploy(
                on("main", env({"name": "SECRET_MODE", "value": "file"}))
            ),
            "secret mounted as a volume": pod(
                volume({"name": "tls", "secret": {"secretName": "tls"}})
            ),
            "envFrom configMapRef": deploy(
                on("main", env_from({"configMapRef": {"name": "settings"}}))
            ),
            "fieldRef": pod(
                on(
                    "main",
                    env(
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        }
                    ),
                )
            ),
        },
    ),
    K8sCheck(
        id="k8s-host-ports",
        title="Minimize the admission of containers which use HostPorts",
        requirement=(
            "Minimize the admission of containers which use HostPorts. No container of any "
            "workload may bind a port of its node."
        ),
        rego=_ctr('\tsome p in c.ports\n\tobject.get(p, "hostPort", 0) > 0'),
        truth=any_container(
            lambda c: any((p.get("hostPort") or 0) > 0 for p in c.get("ports") or [])
        ),
        bad={
            "hostPort 8080": pod(
                on("main", field_set(ports=[{"containerPort": 8080, "hostPort": 8080}]))
            ),
            "sidecar hostPort 9100": deploy(
                on("sidecar", field_set(ports=[{"containerPort": 9100, "hostPort": 9100}]))
            ),
            "UDP hostPort 53": pod(
                on(
                    "main",
                    field_set(ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]),
                )
            ),
            "hostPort on one address": deploy(
                on(
                    "main",
                    field_set(
                        ports=[
                            {"containerPort": 8080, "name": "http"},
                            {"containerPort": 8443, "hostPort": 443, "hostIP": "10.0.0.11"},
                        ]
                    ),
                )
            ),
        },
        near={
            "containerPort 80": pod(
                on("main", field_set(ports=[{"containerPort": 80, "protocol": "TCP"}]))
            ),
            "hostPort 0": deploy(
                on("main", field_set(ports=[{"containerPort": 8080, "hostPort": 0}]))
            ),
            "NodePort service": add(_service("NodePort", ports=[{"port": 80, "nodePort": 30080}])),
            "several container ports": pod(
                on("main", field_set(ports=[{"containerPort": 8080}, {"containerPort": 9090}]))
            ),
            "hostNetwork false with ports": deploy(spec_set(hostNetwork=False)),
        },
    ),
    K8sCheck(
        id="k8s-readonly-rootfs",
        title="Containers must use a read-only root filesystem",
        requirement=(
            "Containers must be immutable at runtime. Every container and init container of "
            "every workload must mount its root filesystem read-only."
        ),
        rego=_wl(
            '\tsome c in array.concat(object.get(spec, "containers", []), '
            'object.get(spec, "initContainers", []))\n'
            "\tnot c.securityContext.readOnlyRootFilesystem == true"
        ),
        truth=per_workload(
            lambda o, s: any(
                _sc(c).get("readOnlyRootFilesystem") is not True
                for c in [*s.get("containers", []), *s.get("initContainers", [])]
            )
        ),
        bad={
            "false": pod(on("main", sc(readOnlyRootFilesystem=False))),
            "init container without the field": deploy(on("init", sc(readOnlyRootFilesystem=None))),
            "sidecar without the field": pod(on("sidecar", sc(readOnlyRootFilesystem=None))),
            "deployment container false": deploy(on("main", sc(readOnlyRootFilesystem=False))),
        },
        near={
            "writable emptyDir mounted": pod(volume({"name": "cache", "emptyDir": {}})),
            "init container read-only": deploy(on("init", sc(readOnlyRootFilesystem=True))),
            "ephemeral container (not a container or init container)": pod(
                on("ephemeral", sc(readOnlyRootFilesystem=None))
            ),
            "sidecar read-only": deploy(on("sidecar", sc(readOnlyRootFilesystem=True))),
            "pod fsGroup set": pod(psc(fsGroup=2000)),
        },
    ),
    K8sCheck(
        id="k8s-default-service-account",
        title="Ensure that default service accounts are not actively used",
        requirement=(
            "Ensure that default service accounts are not actively used. No workload may run "
            "under its namespace's default service account."
        ),
        rego=_wl('\tobject.get(spec, "serviceAccountName", "default") == "default"'),
        truth=per_workload(lambda o, s: s.get("serviceAccountName", "default") == "default"),
        bad={
            "serviceAccountName absent": pod(spec_set(serviceAccountName=None)),
            "explicitly default": deploy(spec_set(serviceAccountName="default")),
            "deployment without an account": deploy(spec_set(serviceAccountName=None)),
            "pod explicitly default": pod(spec_set(serviceAccountName="default")),
        },
        near={
            "account default-reader": pod(spec_set(serviceAccountName="default-reader")),
            "account app-default": deploy(spec_set(serviceAccountName="app-default")),
            "account defaults": pod(spec_set(serviceAccountName="defaults")),
            "workload in namespace default-apps": deploy(namespace="default-apps"),
        },
    ),
    K8sCheck(
        id="k8s-rbac-cluster-admin",
        title="Ensure that the cluster-admin role is only used where required",
        requirement=(
            "Ensure that the cluster-admin role is only used where required. The ClusterRole "
            "cluster-admin may be bound to no subject other than the group system:masters."
        ),
        rego="""violations contains ident(o) if {
	some o in input.items
	o.kind in {"ClusterRoleBinding", "RoleBinding"}
	o.roleRef.kind == "ClusterRole"
	o.roleRef.name == "cluster-admin"
	some s in o.subjects
	not masters(s)
}

masters(s) if {
	s.kind == "Group"
	s.name == "system:masters"
}""",
        truth=_cluster_admin_truth,
        bad={
            "bound to a user": add(
                _binding("ClusterRoleBinding", "ClusterRole", "cluster-admin", [_USER])
            ),
            "namespaced binding of cluster-admin": add(
                _binding("RoleBinding", "ClusterRole", "cluster-admin", [_SA])
            ),
            "bound to a group": add(
                _binding("ClusterRoleBinding", "ClusterRole", "cluster-admin", [_GROUP])
            ),
            "system:masters and a service account": add(
                _binding("ClusterRoleBinding", "ClusterRole", "cluster-admin", [_MASTERS, _SA])
            ),
        },
        near={
            "admin bound to a user": add(
                _binding("ClusterRoleBinding", "ClusterRole", "admin", [_USER])
            ),
            "edit bound to a group": add(_binding("RoleBinding", "ClusterRole", "edit", [_GROUP])),
            "a Role named cluster-admin": add(
                _binding("RoleBinding", "Role", "cluster-admin", [_SA])
            ),
            "cluster-admin-readonly": add(
                _binding("ClusterRoleBinding", "ClusterRole", "cluster-admin-readonly", [_USER])
            ),
            "another binding for system:masters": add(
                _binding("ClusterRoleBinding", "ClusterRole", "cluster-admin", [_MASTERS])
            ),
        },
    ),
    K8sCheck(
        id="k8s-rbac-secrets",
        title="Minimize access to secrets",
        requirement=(
            "Minimize access to secrets. No Role or ClusterRole, other than the default roles "
            "Kubernetes bootstraps, may grant get, list or watch on Secret objects."
        ),
        rego=_grants("secrets", ["get", "list", "watch"]),
        truth=rbac_grants("secrets", {"get", "list", "watch"}),
        bad={
            "role reads secrets": grant("Role", "secret-reader", [""], ["secrets"], ["get"]),
            "cluster role lists every resource": grant(
                "ClusterRole", "auditor", [""], ["*"], ["list"]
            ),
            "every verb on secrets": grant("Role", "vault-sync", [""], ["secrets"], ["*"]),
            "any API group": grant("ClusterRole", "watcher", ["*"], ["secrets"], ["watch"]),
            "one named secret": grant(
                "Role", "db-reader", [""], ["secrets"], ["get"], resourceNames=["db-password"]
            ),
        },
        near={
            "create only": grant("Role", "secret-writer", [""], ["secrets"], ["create"]),
            "config maps": grant(
                "ClusterRole", "config-reader", [""], ["configmaps"], ["get", "list"]
            ),
            "sealed secrets of another API group": grant(
                "Role", "sealer", ["bitnami.com"], ["sealedsecrets"], ["get", "list"]
            ),
            "secrets-store classes": grant(
                "ClusterRole",
                "csi-reader",
                ["secrets-store.csi.x-k8s.io"],
                ["secretproviderclasses"],
                ["get"],
            ),
            "delete secrets": grant("Role", "janitor", [""], ["secrets"], ["delete"]),
        },
    ),
    K8sCheck(
        id="k8s-rbac-wildcards",
        title="Minimize wildcard use in Roles and ClusterRoles",
        requirement=(
            "Minimize wildcard use in Roles and ClusterRoles. No Role or ClusterRole, other than "
            "the default roles Kubernetes bootstraps, may use the wildcard * in a rule."
        ),
        rego=_roles(
            '\tsome key in ["apiGroups", "resources", "verbs", "nonResourceURLs"]\n'
            '\t"*" in object.get(r, key, [])'
        ),
        truth=_wildcard_truth,
        bad={
            "every verb": grant("Role", "deployer", ["apps"], ["deployments"], ["*"]),
            "every resource": grant("ClusterRole", "reader", [""], ["*"], ["get"]),
            "every API group": grant("Role", "scaler", ["*"], ["deployments/scale"], ["update"]),
            "every non-resource URL": add(
                _role("ClusterRole", "prober", {"nonResourceURLs": ["*"], "verbs": ["get"]})
            ),
            "wildcard among verbs": grant("Role", "ops", [""], ["pods"], ["get", "list", "*"]),
        },
        near={
            "explicit verbs": grant(
                "Role", "deployer", ["apps"], ["deployments"], ["get", "list", "patch"]
            ),
            "non-resource URL /metrics": add(
                _role("ClusterRole", "metrics", {"nonResourceURLs": ["/metrics"], "verbs": ["get"]})
            ),
            "aggregated cluster role": add(
                lambda cl: {
                    **meta("ClusterRole", cl.unique("monitoring")),
                    "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "mon"}}]},
                    "rules": [],
                }
            ),
            "subresource list": grant(
                "Role", "debugger", [""], ["pods/log", "pods/exec"], ["get", "create"]
            ),
            "role named wildcard-viewer": grant("Role", "wildcard-viewer", [""], ["pods"], ["get"]),
        },
    ),
    K8sCheck(
        id="k8s-rbac-pod-create",
        title="Minimize access to create pods",
        requirement=(
            "Minimize access to create pods. No Role or ClusterRole, other than the default "
            "roles Kubernetes bootstraps, may grant create on Pod objects."
        ),
        rego=_grants("pods", ["create"]),
        truth=rbac_grants("pods", {"create"}),
        bad={
            "role creates pods": grant("Role", "runner", [""], ["pods"], ["create"]),
            "every verb on pods": grant("ClusterRole", "pod-admin", [""], ["pods"], ["*"]),
            "create on every resource": grant("Role", "builder", [""], ["*"], ["create", "get"]),
            "any API group": grant("ClusterRole", "spawner", ["*"], ["pods"], ["create"]),
            "pods among several resources": grant(
                "Role", "ci", [""], ["services", "pods", "configmaps"], ["create", "update"]
            ),
        },
        near={
            "read pods": grant("Role", "viewer", [""], ["pods"], ["get", "list"]),
            "exec into pods": grant("Role", "debugger", [""], ["pods/exec"], ["create"]),
            "create deployments": grant(
                "ClusterRole", "deployer", ["apps"], ["deployments"], ["create"]
            ),
            "evict pods": grant("Role", "drainer", [""], ["pods/eviction"], ["create"]),
            "pod templates": grant("Role", "templater", [""], ["podtemplates"], ["create"]),
        },
    ),
    K8sCheck(
        id="k8s-rbac-escalation",
        title="Limit use of the Bind, Impersonate and Escalate permissions",
        requirement=(
            "Limit use of the Bind, Impersonate and Escalate permissions in the Kubernetes "
            "cluster. No Role or ClusterRole, other than the default roles Kubernetes "
            "bootstraps, may grant the bind, impersonate or escalate verbs."
        ),
        rego=_roles('\tsome v in r.verbs\n\tv in {"bind", "escalate", "impersonate", "*"}'),
        truth=_escalation_truth,
        bad={
            "impersonate users": grant("ClusterRole", "support", [""], ["users"], ["impersonate"]),
            "bind roles": grant(
                "Role", "delegator", ["rbac.authorization.k8s.io"], ["roles"], ["bind"]
            ),
            "escalate cluster roles": grant(
                "ClusterRole",
                "rbac-manager",
                ["rbac.authorization.k8s.io"],
                ["clusterroles"],
                ["escalate", "get"],
            ),
            "every verb on roles": grant(
                "Role", "role-admin", ["rbac.authorization.k8s.io"], ["roles"], ["*"]
            ),
            "impersonate service accounts": grant(
                "Role", "ci-proxy", [""], ["serviceaccounts"], ["impersonate"]
            ),
        },
        near={
            "read roles": grant(
                "ClusterRole",
                "rbac-viewer",
                ["rbac.authorization.k8s.io"],
                ["roles"],
                ["get", "list"],
            ),
            "create role bindings": grant(
                "Role",
                "binder",
                ["rbac.authorization.k8s.io"],
                ["rolebindings"],
                ["create", "update"],
            ),
            "role named impersonator": grant("Role", "impersonator", [""], ["pods"], ["get"]),
            "token requests": grant(
                "Role", "token-minter", [""], ["serviceaccounts/token"], ["create"]
            ),
            "approve certificates": grant(
                "ClusterRole",
                "approver",
                ["certificates.k8s.io"],
                ["certificatesigningrequests/approval"],
                ["update"],
            ),
        },
    ),
    K8sCheck(
        id="k8s-network-policies",
        title="Ensure that all Namespaces have Network Policies defined",
        requirement=(
            "Ensure that all Namespaces have Network Policies defined. Every namespace other "
            "than the Kubernetes system namespaces (kube-system, kube-public, kube-node-lease) "
            "must contain at least one NetworkPolicy."
        ),
        rego="""violations contains ident(o) if {
	some o in input.items
	o.kind == "Namespace"
	not o.metadata.name in {"kube-system", "kube-public", "kube-node-lease"}
	not covered(o.metadata.name)
}

covered(ns) if {
	some p in input.items
	p.kind == "NetworkPolicy"
	p.metadata.namespace == ns
}""",
        truth=_netpol_truth,
        bad={
            "new namespace without a policy": _new_namespace(None),
            "default namespace without a policy": _drop_policy("default"),
            "empty namespace without a policy": _new_namespace(None, with_app=False),
            "application namespace loses its policy": lambda cl: _drop_policy(cl.app()[0])(cl),
        },
        near={
            "allow-all policy": _new_namespace({"podSelector": {}, "ingress": [{}]}),
            "egress-only policy": _new_namespace(
                {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"namespaceSelector": {}}]}],
                }
            ),
            "policy with an empty ingress list": _new_namespace(
                {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}
            ),
            "policy for some pods only": _new_namespace(
                {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"]}
            ),
            "empty namespace with a policy": lambda cl: _new_namespace(
                {"podSelector": {}, "policyTypes": ["Ingress"]}, with_app=False
            )(cl),
        },
    ),
    K8sCheck(
        id="k8s-service-external-ips",
        title="Services must not use external IPs",
        requirement=(
            "Restrict Service external IPs (CVE-2020-8554). No Service may set external IPs."
        ),
        rego="""violations contains ident(o) if {
	some o in input.items
	o.kind == "Service"
	count(object.get(o.spec, "externalIPs", [])) > 0
}""",
        truth=lambda objs: {
            ident(o)
            for o in objs
            if o["kind"] == "Service" and (o["spec"].get("externalIPs") or [])
        },
        bad={
            "ClusterIP service with an external IP": add(_service(externalIPs=["203.0.113.10"])),
            "NodePort service with external IPs": add(
                _service("NodePort", externalIPs=["198.51.100.7", "198.51.100.8"])
            ),
            "LoadBalancer with an external IP": add(
                _service("LoadBalancer", externalIPs=["192.0.2.44"])
            ),
            "external IP on a headless service": add(
                _service(clusterIP="None", externalIPs=["203.0.113.99"])
            ),
        },
        near={
            "load balancer ingress address": add(
                lambda cl: {
                    **_service("LoadBalancer")(cl),
                    "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}},
                }
            ),
            "loadBalancerIP requested": add(
                _service("LoadBalancer", loadBalancerIP="203.0.113.20")
            ),
            "ExternalName service": add(_service("ExternalName", externalName="db.corp.example")),
            "dual-stack cluster IPs": add(
                _service(ipFamilyPolicy="PreferDualStack", clusterIPs=["10.96.4.4", "fd00::4"])
            ),
            "empty external IP list": add(_service(externalIPs=[])),
        },
    ),
    K8sCheck(
        id="k8s-configmap-secrets",
        title="Secrets must not be stored in ConfigMaps",
        requirement=(
            "Secrets must be stored as Secret objects. No ConfigMap may hold a credential: a "
            "password, token or API key, a private key, an access key or a connection string "
            "with a password."
        ),
        rego=r"""violations contains ident(o) if {
	some o in input.items
	o.kind == "ConfigMap"
	some k, v in o.data
	credential(k, v)
}

credential(k, v) if {
	v != ""
	regex.match(`(password|passwd|secret|token|apikey)$`, regex.replace(lower(k), `[^a-z]`, ""))
}

credential(_, v) if regex.match(`-----BEGIN [A-Z ]*PRIVATE KEY-----`, v)

credential(_, v) if regex.match(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`, v)

credential(_, v) if regex.match(`://[^/\s:@]+:[^/\s@]+@`, v)""",
        truth=_configmap_truth,
        bad={
            "DB_PASSWORD": add(_configmap({"DB_HOST": "db.shop", "DB_PASSWORD": "s3cr3t-Pass"})),
            "private key in a file": add(_configmap({"tls.key": _PEM, "tls.crt": _CERT})),
            "connection string with a password": add(
                _configmap({"DATABASE_URL": "postgres://app:pa55word@db.shop:5432/orders"})
            ),
            "access key in a properties file": add(
                _configmap({"app.properties": "s3.bucket=exports\ns3.key=AKIAIOSFODNN7EXAMPLE\n"})
            ),
            "api token key": add(_configmap({"slack.api-token": "xoxb-1234-5678-abcdef"})),
        },
        near={
            "certificate": add(_configmap({"ca.pem": _CERT})),
            "SSH public key": add(
                _configmap({"authorized_keys": "ssh-ed25519 AAAAC3NzaC1lZDI1 ops@corp\n"})
            ),
            "connection string without a password": add(
                _configmap({"DATABASE_URL": "postgres://db.shop:5432/orders?sslmode=require"})
            ),
            "token lifetime setting": add(
                _configmap({"tokenTTL": "3600", "SECRET_NAME": "db-credentials"})
            ),
            "empty password placeholder": add(_configmap({"SMTP_PASSWORD": ""})),
        },
    ),
]

# Checks of the library that are no scenario of this catalog of their own: the requirements of
# the policy-update family (the changed ones and the originals they replace) and the single
# host namespaces, which community packs may still name.
UPDATE_ONLY: list[K8sCheck] = [
    K8sCheck(
        id="k8s-host-pid",
        title="Pods must not share the host PID namespace",
        requirement="Workloads must not share the host's process ID namespace (hostPID).",
        rego=_wl("\tspec.hostPID == true"),
        truth=per_workload(lambda o, s: s.get("hostPID") is True),
        bad={
            "hostPID pod": pod(spec_set(hostPID=True)),
            "hostPID deployment": deploy(spec_set(hostPID=True)),
            "hostPID cron job": cron(spec_set(hostPID=True)),
            "hostPID pod in another namespace": pod(spec_set(hostPID=True), namespace="batch"),
        },
        near={
            "hostPID false": pod(spec_set(hostPID=False)),
            "shareProcessNamespace": deploy(spec_set(shareProcessNamespace=True)),
            "hostNetwork": pod(spec_set(hostNetwork=True)),
            "hostIPC": deploy(spec_set(hostIPC=True)),
        },
    ),
    K8sCheck(
        id="k8s-host-ipc",
        title="Pods must not share the host IPC namespace",
        requirement="Workloads must not share the host's IPC namespace (hostIPC).",
        rego=_wl("\tspec.hostIPC == true"),
        truth=per_workload(lambda o, s: s.get("hostIPC") is True),
        bad={
            "hostIPC pod": pod(spec_set(hostIPC=True)),
            "hostIPC deployment": deploy(spec_set(hostIPC=True)),
            "hostIPC cron job": cron(spec_set(hostIPC=True)),
            "hostIPC pod in another namespace": pod(spec_set(hostIPC=True), namespace="batch"),
        },
        near={
            "hostIPC false": pod(spec_set(hostIPC=False)),
            "memory-backed /dev/shm": deploy(
                volume({"name": "dshm", "emptyDir": {"medium": "Memory"}})
            ),
            "hostPID": pod(spec_set(hostPID=True)),
            "hostNetwork": deploy(spec_set(hostNetwork=True)),
        },
    ),
    K8sCheck(
        id="k8s-host-network",
        title="Pods must not use the host network",
        requirement="Workloads must not use the host's network namespace (hostNetwork).",
        rego=_wl("\tspec.hostNetwork == true"),
        truth=per_workload(lambda o, s: s.get("hostNetwork") is True),
        bad={
            "hostNetwork pod": pod(spec_set(hostNetwork=True)),
            "hostNetwork deployment": deploy(spec_set(hostNetwork=True)),
        },
        near={
            "hostNetwork false": pod(spec_set(hostNetwork=False)),
            "hostPID": pod(spec_set(hostPID=True)),
        },
    ),
    K8sCheck(
        id="k8s-image-registry",
        title="Images must be pinned and come from the internal registry",
        requirement=(
            "Trusted images only: every container image of every workload must come from the "
            f"internal registry ({REGISTRY}) and be pinned by digest or by a tag other than "
            "latest."
        ),
        rego=_ctr("\tunpinned(c.image)")
        + "\n\n"
        + _ctr(f'\tnot startswith(c.image, "{REGISTRY}/")')
        + UNPINNED_REGO,
        truth=any_container(
            lambda c: unpinned(c["image"]) or not c["image"].startswith(f"{REGISTRY}/")
        ),
        bad={
            "public registry, pinned": pod(
                on("main", field_set(image="docker.io/library/nginx:1.27.2"))
            ),
            "internal registry, latest": deploy(
                on("sidecar", field_set(image=f"{REGISTRY}/ops/agent:latest"))
            ),
            "registry with a port": pod(
                on("main", field_set(image="registry.corp.example:5000/shop/cart:4.1.0"))
            ),
            "look-alike host": deploy(
                on("init", field_set(image="registry.corp.example.evil.io/x/migrate:1.0"))
            ),
        },
        near={
            "digest": pod(on("main", field_set(image=f"{REGISTRY}/shop/cart@sha256:" + "ab" * 32))),
            "tag latest-stable": deploy(
                on("sidecar", field_set(image=f"{REGISTRY}/ops/agent:latest-stable"))
            ),
            "nested path": pod(on("main", field_set(image=f"{REGISTRY}/team/a/b/cart:2.0.1"))),
            "init container from the registry": deploy(on("init")),
        },
    ),
    K8sCheck(
        id="k8s-limits-and-requests",
        title="Every container must set CPU and memory limits and requests",
        requirement=(
            "Resource management: every container and init container of every workload must "
            "set CPU and memory limits and CPU and memory requests."
        ),
        rego="\n\n".join(
            _wl(
                '\tsome c in array.concat(object.get(spec, "containers", []), '
                f'object.get(spec, "initContainers", []))\n\tnot c.resources.{kind}.{res}'
            )
            for kind in ("limits", "requests")
            for res in ("cpu", "memory")
        ),
        truth=per_workload(
            lambda o, s: any(
                not ((c.get("resources") or {}).get(k) or {}).get(r)
                for c in [*s.get("containers", []), *s.get("initContainers", [])]
                for k in ("limits", "requests")
                for r in ("cpu", "memory")
            )
        ),
        bad={
            "limits without requests": pod(
                on("main", field_set(resources={"limits": {"cpu": "1", "memory": "1Gi"}}))
            ),
            "cpu request missing": deploy(
                on(
                    "sidecar",
                    field_set(
                        resources={
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"memory": "1Gi"},
                        }
                    ),
                )
            ),
            "no limits": pod(
                on("main", field_set(resources={"requests": {"cpu": "1", "memory": "1Gi"}}))
            ),
        },
        near={
            "requests equal limits": pod(
                on(
                    "main",
                    field_set(
                        resources={
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "1", "memory": "1Gi"},
                        }
                    ),
                )
            ),
            "init container complete": deploy(on("init")),
            "numeric cpu values": pod(
                on(
                    "main",
                    field_set(
                        resources={
                            "limits": {"cpu": 2, "memory": "2Gi"},
                            "requests": {"cpu": 1, "memory": "1Gi"},
                        }
                    ),
                )
            ),
            "ephemeral container (no resources allowed)": deploy(on("ephemeral")),
        },
    ),
    K8sCheck(
        id="k8s-privileged-except-system",
        title="Containers must not run privileged, except in namespace kube-system",
        requirement=(
            "No privileged containers outside the system namespace: no container of any "
            "workload may run privileged, unless the workload is in namespace kube-system."
        ),
        rego=_ctr(
            '\tc.securityContext.privileged == true\n\to.metadata.namespace != "kube-system"'
        ),
        truth=per_workload(
            lambda o, s: (
                o["metadata"].get("namespace") != "kube-system"
                and any(_sc(c).get("privileged") is True for c in containers_of(s))
            )
        ),
        bad={
            "privileged container": pod(on("main", sc(privileged=True))),
            "privileged init in kube-public": deploy(
                on("init", sc(privileged=True)), namespace="kube-public"
            ),
            "privileged sidecar": deploy(on("sidecar", sc(privileged=True))),
        },
        near={
            "privileged in kube-system": pod(
                on("main", sc(privileged=True)), namespace="kube-system"
            ),
            "privileged init in kube-system": deploy(
                on("init", sc(privileged=True)), namespace="kube-system"
            ),
            "unprivileged": pod(on("main", sc(privileged=False))),
            "privileged deployment in kube-system": deploy(
                on("sidecar", sc(privileged=True)), namespace="kube-system"
            ),
            "privileged cron job in kube-system": cron(
                on("main", sc(privileged=True)), namespace="kube-system"
            ),
        },
    ),
]

#: A violation in a cron job's pod template for every workload check (hidden snapshots only).
_IN_CRON_JOBS: dict[str, SpecFn] = {
    "k8s-host-namespaces": spec_set(hostNetwork=True),
    "k8s-privileged": on("main", sc(privileged=True)),
    "k8s-privilege-escalation": on("main", sc(allowPrivilegeEscalation=True)),
    "k8s-run-as-non-root": psc(runAsNonRoot=None),
    "k8s-added-capabilities": on("main", caps(add=["SYS_ADMIN"])),
    "k8s-capabilities-drop-all": on("main", caps(drop=["NET_RAW"])),
    "k8s-host-path": volume({"name": "backup", "hostPath": {"path": "/var/lib/etcd"}}),
    "k8s-seccomp": psc(seccompProfile={"type": "Unconfined"}),
    "k8s-image-tag": on("main", field_set(image="postgres:latest")),
    "k8s-resource-limits": on("main", field_set(resources={"requests": {"cpu": "1"}})),
    "k8s-secret-env": on("main", env_from({"secretRef": {"name": "backup-credentials"}})),
    "k8s-host-ports": on("main", field_set(ports=[{"containerPort": 9000, "hostPort": 9000}])),
    "k8s-readonly-rootfs": on("main", sc(readOnlyRootFilesystem=False)),
    "k8s-default-service-account": spec_set(serviceAccountName=None),
    "k8s-automount-token": spec_set(automountServiceAccountToken=True),
    "k8s-image-registry": on("main", field_set(image="quay.io/backup/restic:0.16.4")),
    "k8s-limits-and-requests": on(
        "main", field_set(resources={"limits": {"cpu": "1", "memory": "1Gi"}})
    ),
    "k8s-privileged-except-system": on("main", sc(privileged=True)),
    "k8s-host-network": spec_set(hostNetwork=True),
}


def _with_cron_job(check: K8sCheck) -> K8sCheck:
    fn = _IN_CRON_JOBS.get(check.id)
    if fn is None:
        return check
    return dataclasses.replace(check, bad={**check.bad, "in a cron job": cron(fn)})


CHECKS = [_with_cron_job(c) for c in CHECKS]
UPDATE_ONLY = [_with_cron_job(c) for c in UPDATE_ONLY]
LIBRARY = CHECKS + UPDATE_ONLY
_BY_ID = {c.id: c for c in LIBRARY}


def by_id(check_id: str) -> K8sCheck:
    """A check of this family."""
    return _BY_ID[check_id]


def _background(cl: Cluster, apps: int) -> None:
    cl.bootstrap()
    for _ in range(apps):
        cl.application()


def _distractors(judged: K8sCheck) -> list[tuple[str, Factory]]:
    """Violations of other checks (never of the judged one once checked)."""
    return [
        (f"{other.id}: {label}", fn)
        for other in CHECKS
        if other.id != judged.id
        for label, fn in list(other.bad.items())[1:]
    ]


def in_namespace(fn: Factory, namespace: str) -> Factory:
    """``fn``, with every namespaced object it adds moved into ``namespace``."""

    def apply(cl: Cluster) -> None:
        seen = {id(o) for o in cl.objects}
        fn(cl)
        cl.namespace(namespace)
        for o in cl.objects:
            md = o["metadata"]
            if id(o) in seen or o["kind"] == "Namespace" or not md.get("namespace"):
                continue
            old = md["namespace"]
            md["namespace"] = namespace
            for subject in o.get("subjects") or []:
                if subject.get("namespace") == old:
                    subject["namespace"] = namespace

    return apply


@functools.cache
def movable(check_id: str) -> tuple[tuple[str, Factory], ...]:
    """The check's violations that still violate, and only there, once moved to a namespace.

    The same for every trial: computed once per check.
    """
    return movable_of(_BY_ID[check_id])


def movable_of(check: K8sCheck) -> tuple[tuple[str, Factory], ...]:
    """:func:`movable` of a check object (one with an organization's values, say)."""
    out = []
    for label, fn in check.bad.items():
        probe = Cluster(random.Random(0))
        _background(probe, 1)
        in_namespace(fn, "waiver-probe")(probe)
        found = check.truth(probe.objects)
        if found and all(i.split("/")[1] == "waiver-probe" for i in found):
            out.append((label, fn))
    return tuple(out)


def waivable(check_id: str) -> bool:
    """Whether waivers of namespaces can exempt the check's violations (they are namespaced)."""
    return len(movable(check_id)) >= 2


def _variant(
    name: str,
    rng: random.Random,
    used: set[str],
    check: K8sCheck,
    picks: list[tuple[str, Factory]],
    n_distract: int,
    waivers: Waivers | None = None,
    org_objects: list[Obj] | None = None,
) -> Variant:
    """A cluster with ``picks`` (and violations of other checks that leave ``check`` alone)."""
    cl = Cluster(rng, used)
    _background(cl, 3)
    if waivers is not None:
        _put(cl, waivers.objects())
    _put(cl, org_objects or [])
    notes = []
    for label, fn in picks:
        fn(cl)
        notes.append(label)
    distract = _distractors(check)
    for label, fn in rng.sample(distract, min(n_distract, len(distract))):
        trial = Cluster(random.Random(rng.random()), set(cl.used), list(cl.objects))
        before = check.truth(trial.objects)
        fn(trial)
        if check.truth(trial.objects) == before:
            cl.objects, cl.used = trial.objects, trial.used
            notes.append(f"other requirement ({label})")
    snap = cl.snapshot()
    items = snap["items"]
    violating = check.truth(items)
    if waivers is not None:
        violating = {i for i in violating if not waivers.waived(i.split("/")[1])}
    return Variant(name, snap, violating, [ident(o) for o in items], notes)


def _put(cl: Cluster, objs: list[Obj]) -> None:
    """Add ``objs``; one already there (same kind, namespace, name) gains their annotations."""
    for o in objs:
        md = o["metadata"]
        there = cl.find(o["kind"], md.get("namespace"), md["name"])
        if there is None:
            cl.add(copy.deepcopy(o))
            continue
        if md.get("annotations"):
            there["metadata"].setdefault("annotations", {}).update(md["annotations"])
        if o.get("data"):
            there.setdefault("data", {}).update(o["data"])


def variants(
    check_id: str,
    seed: int,
    compliant: int,
    non_compliant: int,
    also: list[str] | None = None,
    visible_seed: int | None = None,
    waivers: Waivers | None = None,
    judged: K8sCheck | None = None,
    org_objects: list[Obj] | None = None,
) -> tuple[Variant, list[Variant]]:
    """The visible snapshot and the hidden ones of a check.

    The visible snapshot shows the check's first violating mutation and first near miss;
    hidden snapshots use the others (each violating snapshot one or two violations, each
    compliant one two near misses), mixed with violations of other checks. With ``waivers``
    (for a check whose violations are namespaced), every snapshot holds the organization's
    waivers, every compliant one a violation in a namespace whose waiver holds, and half the
    violating ones a violation in a namespace whose waiver has expired (when some have).

    Args:
        check_id: The judged check.
        seed: Seed of the hidden snapshots.
        compliant: Number of hidden snapshots without a violation.
        non_compliant: Number of hidden snapshots with at least one violating object.
        also: Other checks whose violations must appear too (policy-update family).
        visible_seed: Seed of the visible snapshot (default ``seed``).
        waivers: The trial's waivers (ignored for a check whose violations are not namespaced).
        judged: The check as the trial's organization states it (its values drawn: see
            :mod:`.orgparams`); default the library's check ``check_id``.
        org_objects: Objects every snapshot holds (where the organization keeps its values).

    Raises:
        ValueError: a library mutation does not do what it claims (a library bug).
    """
    check = judged or _BY_ID[check_id]
    rng = random.Random(f"{check_id}:hidden:{seed}")
    visible_rng = random.Random(
        f"{check_id}:visible:{seed if visible_seed is None else visible_seed}"
    )
    self_test(check)
    used: set[str] = set()
    bad = list(check.bad.items())
    near = list(check.near.items())
    extra = [
        (f"{c}: {lbl}", fn)
        for c in also or []
        if c != check_id
        for lbl, fn in list(_BY_ID[c].bad.items())
    ]
    moves: tuple[tuple[str, Factory], ...] = ()
    if waivers is not None:
        moves = movable(check_id) if judged is None else movable_of(check)
    if len(moves) < 2:
        waivers = None

    def waived(i: int, expired: bool) -> list[tuple[str, Factory]]:
        if waivers is None:
            return []
        label, fn = moves[i % len(moves)]
        pool = waivers.expired if expired else waivers.active
        if not pool:
            return []
        ns = pool[i % len(pool)]
        state = "expired" if expired else "current"
        return [(f"{label}, in {ns} ({state} waiver)", in_namespace(fn, ns))]

    first = [bad[0], near[0], *waived(0, False)]
    visible = _variant("visible", visible_rng, used, check, first, 1, waivers, org_objects)
    hidden_bad, hidden_near = rotated(rng, bad[1:]), rotated(rng, near[1:])
    clean: list[Variant] = []
    for i in range(compliant):
        picks = [hidden_near[(2 * i + j) % len(hidden_near)] for j in range(2)]
        picks += [extra[(2 * i + j) % len(extra)] for j in range(2)] if extra else []
        picks = [*_keep(check, picks, False), *waived(i + 1, False)]
        clean.append(_variant("", rng, used, check, picks, 2, waivers, org_objects))
    dirty: list[Variant] = []
    for i in range(non_compliant):
        picks = [hidden_bad[i % len(hidden_bad)]]
        if i % 2 == 1:
            picks.append(hidden_bad[(i + 1) % len(hidden_bad)])
        picks.append(hidden_near[i % len(hidden_near)])
        picks += [extra[(2 * i + 1) % len(extra)]] if extra else []
        picks += waived(i, True) if i % 2 == 0 else waived(i, False)
        dirty.append(_variant("", rng, used, check, picks, 1, waivers, org_objects))
    if any(not v.compliant for v in clean) or any(v.compliant for v in dirty) or visible.compliant:
        raise ValueError(f"{check_id}: a snapshot has the wrong verdict")
    hidden = clean + dirty
    rng.shuffle(hidden)
    for i, v in enumerate(hidden):
        v.name = f"v{i + 1}"
    return visible, hidden


def _keep(
    check: K8sCheck, picks: list[tuple[str, Factory]], violate: bool
) -> list[tuple[str, Factory]]:
    """``picks`` without the mutations of other checks that would change ``check``'s verdict."""
    out = []
    for label, fn in picks:
        probe = Cluster(random.Random(0))
        _background(probe, 1)
        fn(probe)
        if bool(check.truth(probe.objects)) == violate:
            out.append((label, fn))
    return out


def self_test(check: K8sCheck) -> None:
    """Every violating mutation violates and every near miss complies, on a clean cluster.

    Raises:
        ValueError: a mutation does not do what its list says.
    """
    for label, fn in check.bad.items():
        cl = Cluster(random.Random(label))
        _background(cl, 2)
        if check.truth(cl.objects):
            raise ValueError(f"{check.id}: a clean cluster violates")
        fn(cl)
        if not check.truth(cl.objects):
            raise ValueError(f"{check.id}: mutation {label!r} does not violate")
    for label, fn in check.near.items():
        cl = Cluster(random.Random(label))
        _background(cl, 2)
        fn(cl)
        if check.truth(cl.objects):
            raise ValueError(f"{check.id}: near miss {label!r} violates")


_ = BOOTSTRAP  # re-exported for the reference's readers
