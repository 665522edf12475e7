"""Kubernetes checks (CIS Kubernetes Benchmark section 5 style) on pod snapshots.

A snapshot is the document ``kubectl get pods --all-namespaces -o json`` prints. Every check
has a Python predicate (ground truth), mutations that make a clean pod violate, near misses
that look alike but comply, and a reference Rego policy returning the violating pods.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from itbench_ciso.checks.base import Check, Variant

Pod = dict[str, Any]
Mutation = Callable[[Pod], None]

REGISTRY = "registry.corp.example"

#: Helpers every reference policy of this family uses.
HELPERS = """
containers(pod) := array.concat(
	object.get(pod.spec, "containers", []),
	object.get(pod.spec, "initContainers", []),
)

ident(pod) := {"kind": "Pod", "namespace": pod.metadata.namespace, "name": pod.metadata.name}
"""


def pod_id(pod: Pod) -> str:
    """``Pod/<namespace>/<name>``: the identity scored for a pod."""
    meta = pod["metadata"]
    return f"Pod/{meta.get('namespace', '')}/{meta['name']}"


def all_containers(pod: Pod) -> list[dict[str, Any]]:
    """Containers and init containers of a pod."""
    spec = pod["spec"]
    return list(spec.get("containers", [])) + list(spec.get("initContainers", []))


def clean_pod(name: str, namespace: str, app: str, version: str, node: str) -> Pod:
    """A pod that satisfies every check of the library."""
    uid = hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()  # noqa: S324 - an id
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}",
            "labels": {"app": app, "version": version},
            "creationTimestamp": "2026-11-20T08:14:02Z",
        },
        "spec": {
            "serviceAccountName": app,
            "automountServiceAccountToken": False,
            "nodeName": node,
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "fsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": app,
                    "image": f"{REGISTRY}/{namespace}/{app}:{version}",
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "env": [{"name": "LOG_LEVEL", "value": "info"}],
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
        "status": {"phase": "Running", "podIP": "10.244.1.17", "hostIP": "10.0.0.11"},
    }


# --- mutation helpers ---------------------------------------------------------------------


def _c(pod: Pod, i: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][i]
    return container


def _sidecar(pod: Pod) -> dict[str, Any]:
    side = copy.deepcopy(_c(pod))
    side["name"] = "log-shipper"
    side["image"] = f"{REGISTRY}/platform/log-shipper:2.3.1"
    side["ports"] = []
    pod["spec"]["containers"].append(side)
    return side


def _init(pod: Pod) -> dict[str, Any]:
    init = copy.deepcopy(_c(pod))
    init["name"] = "init-schema"
    init["image"] = f"{REGISTRY}/platform/migrate:1.0.4"
    init["ports"] = []
    pod["spec"].setdefault("initContainers", []).append(init)
    return init


def _set(*path: str, value: Any) -> Mutation:
    def mutate(pod: Pod) -> None:
        node = pod
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return mutate


def _drop(*path: str) -> Mutation:
    def mutate(pod: Pod) -> None:
        node: Any = pod
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)

    return mutate


def _on_init(fn: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(pod: Pod) -> None:
        fn(_init(pod))

    return mutate


def _on_sidecar(fn: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(pod: Pod) -> None:
        fn(_sidecar(pod))

    return mutate


def _on_main(fn: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(pod: Pod) -> None:
        fn(_c(pod))

    return mutate


def _ctr_sc(**values: Any) -> Callable[[dict[str, Any]], None]:
    def apply(c: dict[str, Any]) -> None:
        sc = c.setdefault("securityContext", {})
        for k, v in values.items():
            if v is None:
                sc.pop(k, None)
            else:
                sc[k] = v

    return apply


def _image(image: str) -> Callable[[dict[str, Any]], None]:
    def apply(c: dict[str, Any]) -> None:
        c["image"] = image

    return apply


def _caps(add: list[str] | None = None, drop: list[str] | None = None) -> Callable[..., None]:
    def apply(c: dict[str, Any]) -> None:
        caps = c.setdefault("securityContext", {}).setdefault("capabilities", {})
        if add is not None:
            caps["add"] = add
        if drop is not None:
            caps["drop"] = drop
        else:
            caps.pop("drop", None)

    return apply


def _resources(
    limits: dict[str, str] | None, requests: dict[str, str] | None
) -> Callable[..., None]:
    def apply(c: dict[str, Any]) -> None:
        res: dict[str, Any] = {}
        if limits is not None:
            res["limits"] = limits
        if requests is not None:
            res["requests"] = requests
        c["resources"] = res

    return apply


def _env(entry: dict[str, Any]) -> Callable[..., None]:
    def apply(c: dict[str, Any]) -> None:
        c.setdefault("env", []).append(entry)

    return apply


def _env_from(entry: dict[str, Any]) -> Callable[..., None]:
    def apply(c: dict[str, Any]) -> None:
        c.setdefault("envFrom", []).append(entry)

    return apply


def _volume(vol: dict[str, Any]) -> Mutation:
    def mutate(pod: Pod) -> None:
        pod["spec"].setdefault("volumes", []).append(vol)

    return mutate


def _ports(port: dict[str, Any]) -> Callable[..., None]:
    def apply(c: dict[str, Any]) -> None:
        c["ports"] = [port]

    return apply


def _both(*muts: Mutation) -> Mutation:
    def mutate(pod: Pod) -> None:
        for m in muts:
            m(pod)

    return mutate


def _namespace(ns: str) -> Mutation:
    return _set("metadata", "namespace", value=ns)


# --- predicates -----------------------------------------------------------------------------


def _effective(pod: Pod, c: dict[str, Any], key: str) -> Any:
    csc = c.get("securityContext") or {}
    if key in csc:
        return csc[key]
    return (pod["spec"].get("securityContext") or {}).get(key)


def runs_as_root(pod: Pod) -> bool:
    """Some container's effective runAsNonRoot is not true, or its effective runAsUser is 0."""
    for c in all_containers(pod):
        if _effective(pod, c, "runAsNonRoot") is not True:
            return True
        if _effective(pod, c, "runAsUser") == 0:
            return True
    return False


def bad_seccomp(pod: Pod) -> bool:
    """Some container's effective seccomp profile is neither RuntimeDefault nor Localhost."""
    for c in all_containers(pod):
        prof = _effective(pod, c, "seccompProfile") or {}
        if prof.get("type") not in ("RuntimeDefault", "Localhost"):
            return True
    return False


def unpinned_image(image: str) -> bool:
    """No digest and either no tag or the tag ``latest``."""
    if "@" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    return ":" not in last or last.endswith(":latest")


def _any_ctr(pred: Callable[[dict[str, Any]], bool]) -> Callable[[Pod], bool]:
    return lambda pod: any(pred(c) for c in all_containers(pod))


def _sc_of(c: dict[str, Any]) -> dict[str, Any]:
    return c.get("securityContext") or {}


def _added_caps(c: dict[str, Any]) -> list[str]:
    return list((_sc_of(c).get("capabilities") or {}).get("add") or [])


def _dropped_caps(c: dict[str, Any]) -> list[str]:
    return list((_sc_of(c).get("capabilities") or {}).get("drop") or [])


def _limits_missing(c: dict[str, Any]) -> bool:
    limits = (c.get("resources") or {}).get("limits") or {}
    return not limits.get("cpu") or not limits.get("memory")


def _requests_missing(c: dict[str, Any]) -> bool:
    req = (c.get("resources") or {}).get("requests") or {}
    return not req.get("cpu") or not req.get("memory")


def _secret_env(c: dict[str, Any]) -> bool:
    env = any((e.get("valueFrom") or {}).get("secretKeyRef") for e in c.get("env") or [])
    env_from = any(f.get("secretRef") for f in c.get("envFrom") or [])
    return env or env_from


@dataclass(frozen=True)
class K8sCheck(Check):
    """A Kubernetes pod check.

    Attributes:
        violates: Ground-truth predicate on one pod.
        bad: Named mutations that make a clean pod violate.
        near: Named mutations that look close to a violation but comply.
    """

    family: ClassVar[str] = "kubernetes"
    violates: Callable[[Pod], bool] = field(default=lambda pod: False)
    bad: dict[str, Mutation] = field(default_factory=dict)
    near: dict[str, Mutation] = field(default_factory=dict)

    def policy(self, package: str = "compliance") -> str:
        """The reference policy with the family's helpers."""
        body = f"{HELPERS.strip()}\n\n{self.rego.strip()}"
        return f"package {package}\n\nimport rego.v1\n\n{body}\n"


def _violations(cond: str) -> str:
    return f"violations contains ident(pod) if {{\n\tsome pod in input.items\n{cond}\n}}"


def _ctr_violations(cond: str) -> str:
    return _violations(f"\tsome c in containers(pod)\n{cond}")


CHECKS: list[K8sCheck] = [
    K8sCheck(
        id="k8s-host-network",
        title="Pods must not use the host network",
        rego=_violations("\tpod.spec.hostNetwork == true"),
        violates=lambda pod: pod["spec"].get("hostNetwork") is True,
        bad={"hostNetwork": _set("spec", "hostNetwork", value=True)},
        near={
            "hostNetwork false": _set("spec", "hostNetwork", value=False),
            "dnsPolicy ClusterFirstWithHostNet": _set(
                "spec", "dnsPolicy", value="ClusterFirstWithHostNet"
            ),
        },
    ),
    K8sCheck(
        id="k8s-host-pid",
        title="Pods must not share the host PID namespace",
        rego=_violations("\tpod.spec.hostPID == true"),
        violates=lambda pod: pod["spec"].get("hostPID") is True,
        bad={"hostPID": _set("spec", "hostPID", value=True)},
        near={
            "hostPID false": _set("spec", "hostPID", value=False),
            "shareProcessNamespace": _set("spec", "shareProcessNamespace", value=True),
        },
    ),
    K8sCheck(
        id="k8s-host-ipc",
        title="Pods must not share the host IPC namespace",
        rego=_violations("\tpod.spec.hostIPC == true"),
        violates=lambda pod: pod["spec"].get("hostIPC") is True,
        bad={"hostIPC": _set("spec", "hostIPC", value=True)},
        near={
            "hostIPC false": _set("spec", "hostIPC", value=False),
            "memory-backed emptyDir": _volume(
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}
            ),
        },
    ),
    K8sCheck(
        id="k8s-privileged",
        title="Containers must not run privileged",
        rego=_ctr_violations("\tc.securityContext.privileged == true"),
        violates=_any_ctr(lambda c: _sc_of(c).get("privileged") is True),
        bad={
            "privileged container": _on_main(_ctr_sc(privileged=True)),
            "privileged init container": _on_init(_ctr_sc(privileged=True)),
            "privileged sidecar": _on_sidecar(_ctr_sc(privileged=True)),
        },
        near={
            "privileged field absent": _on_main(_ctr_sc(privileged=None)),
            "escalation allowed but not privileged": _on_main(
                _ctr_sc(allowPrivilegeEscalation=True)
            ),
        },
    ),
    K8sCheck(
        id="k8s-privilege-escalation",
        title="Containers must set allowPrivilegeEscalation: false",
        rego=_ctr_violations("\tnot c.securityContext.allowPrivilegeEscalation == false"),
        violates=_any_ctr(lambda c: _sc_of(c).get("allowPrivilegeEscalation") is not False),
        bad={
            "allowPrivilegeEscalation true": _on_main(_ctr_sc(allowPrivilegeEscalation=True)),
            "field absent": _on_main(_ctr_sc(allowPrivilegeEscalation=None)),
            "init container absent": _on_init(_ctr_sc(allowPrivilegeEscalation=None)),
        },
        near={
            "privileged false, escalation false": _on_sidecar(_ctr_sc(privileged=False)),
            "no capabilities dropped": _on_main(_caps(add=None, drop=None)),
        },
    ),
    K8sCheck(
        id="k8s-run-as-non-root",
        title="Containers must run as a non-root user",
        rego=_ctr_violations("\troot_user(pod, c)")
        + """

has_ctr(c, key) if {
	_ = c.securityContext[key]
}

nonroot(pod, c) if c.securityContext.runAsNonRoot == true

nonroot(pod, c) if {
	not has_ctr(c, "runAsNonRoot")
	pod.spec.securityContext.runAsNonRoot == true
}

uid(pod, c) := c.securityContext.runAsUser

uid(pod, c) := pod.spec.securityContext.runAsUser if not has_ctr(c, "runAsUser")

root_user(pod, c) if not nonroot(pod, c)

root_user(pod, c) if uid(pod, c) == 0""",
        violates=runs_as_root,
        bad={
            "pod runAsNonRoot absent": _drop("spec", "securityContext", "runAsNonRoot"),
            "container overrides runAsNonRoot false": _on_main(_ctr_sc(runAsNonRoot=False)),
            "container runAsUser 0": _on_sidecar(_ctr_sc(runAsUser=0)),
            "pod runAsUser 0": _set("spec", "securityContext", "runAsUser", value=0),
        },
        near={
            "set on every container instead of the pod": _both(
                _drop("spec", "securityContext", "runAsNonRoot"),
                _on_main(_ctr_sc(runAsNonRoot=True)),
            ),
            "container runAsUser 1000": _on_main(_ctr_sc(runAsUser=1000)),
        },
    ),
    K8sCheck(
        id="k8s-added-capabilities",
        title="Containers must not add Linux capabilities other than NET_BIND_SERVICE",
        rego=_ctr_violations(
            '\tsome cap in c.securityContext.capabilities.add\n\tcap != "NET_BIND_SERVICE"'
        ),
        violates=_any_ctr(lambda c: any(x != "NET_BIND_SERVICE" for x in _added_caps(c))),
        bad={
            "adds NET_ADMIN": _on_main(_caps(add=["NET_ADMIN"], drop=["ALL"])),
            "init adds SYS_ADMIN": _on_init(_caps(add=["SYS_ADMIN"])),
            "adds NET_BIND_SERVICE and SYS_PTRACE": _on_sidecar(
                _caps(add=["NET_BIND_SERVICE", "SYS_PTRACE"], drop=["ALL"])
            ),
        },
        near={
            "adds NET_BIND_SERVICE": _on_main(_caps(add=["NET_BIND_SERVICE"], drop=["ALL"])),
            "drops NET_ADMIN": _on_main(_caps(drop=["NET_ADMIN", "SYS_ADMIN"])),
        },
    ),
    K8sCheck(
        id="k8s-host-path",
        title="Pods must not mount hostPath volumes",
        rego=_violations("\tsome v in pod.spec.volumes\n\tv.hostPath"),
        violates=lambda pod: any("hostPath" in v for v in pod["spec"].get("volumes") or []),
        bad={
            "docker socket": _volume(
                {"name": "docker", "hostPath": {"path": "/var/run/docker.sock", "type": "Socket"}}
            ),
            "host /var/log": _volume({"name": "varlog", "hostPath": {"path": "/var/log"}}),
        },
        near={
            "PVC named hostpath-data": _volume(
                {"name": "hostpath-data", "persistentVolumeClaim": {"claimName": "hostpath-data"}}
            ),
            "configMap volume": _volume({"name": "config", "configMap": {"name": "app-config"}}),
        },
    ),
    K8sCheck(
        id="k8s-seccomp",
        title="Containers must run with the RuntimeDefault or a Localhost seccomp profile",
        rego=_ctr_violations('\tnot seccomp(pod, c) in {"RuntimeDefault", "Localhost"}')
        + """

seccomp(pod, c) := c.securityContext.seccompProfile.type

seccomp(pod, c) := pod.spec.securityContext.seccompProfile.type if {
	not c.securityContext.seccompProfile
}""",
        violates=bad_seccomp,
        bad={
            "no profile anywhere": _drop("spec", "securityContext", "seccompProfile"),
            "container Unconfined overrides pod": _on_sidecar(
                _ctr_sc(seccompProfile={"type": "Unconfined"})
            ),
            "pod Unconfined": _set(
                "spec", "securityContext", "seccompProfile", value={"type": "Unconfined"}
            ),
        },
        near={
            "set per container only": _both(
                _drop("spec", "securityContext", "seccompProfile"),
                _on_main(_ctr_sc(seccompProfile={"type": "RuntimeDefault"})),
            ),
            "Localhost profile": _set(
                "spec",
                "securityContext",
                "seccompProfile",
                value={"type": "Localhost", "localhostProfile": "profiles/audit.json"},
            ),
        },
    ),
    K8sCheck(
        id="k8s-default-namespace",
        title="Workloads must not run in the default namespace",
        rego=_violations('\tpod.metadata.namespace == "default"'),
        violates=lambda pod: pod["metadata"].get("namespace") == "default",
        bad={"default namespace": _namespace("default")},
        near={
            "namespace default-apps": _namespace("default-apps"),
            "namespace kube-default": _namespace("kube-default"),
        },
    ),
    K8sCheck(
        id="k8s-automount-token",
        title="Pods must set automountServiceAccountToken: false",
        rego=_violations("\tnot pod.spec.automountServiceAccountToken == false"),
        violates=lambda pod: pod["spec"].get("automountServiceAccountToken") is not False,
        bad={
            "field absent": _drop("spec", "automountServiceAccountToken"),
            "true": _set("spec", "automountServiceAccountToken", value=True),
        },
        near={
            "projected token volume absent": _set("spec", "serviceAccountName", value="reader"),
        },
    ),
    K8sCheck(
        id="k8s-image-tag",
        title="Container images must be pinned: a tag other than latest, or a digest",
        rego=_ctr_violations("\tunpinned(c.image)")
        + """

last_part(image) := parts[count(parts) - 1] if parts := split(image, "/")

unpinned(image) if {
	not contains(image, "@")
	not contains(last_part(image), ":")
}

unpinned(image) if {
	not contains(image, "@")
	endswith(last_part(image), ":latest")
}""",
        violates=_any_ctr(lambda c: unpinned_image(c["image"])),
        bad={
            "latest tag": _on_main(_image(f"{REGISTRY}/shop/cart:latest")),
            "no tag behind a registry port": _on_sidecar(
                _image("registry.corp.example:5000/ops/agent")
            ),
            "init container untagged": _on_init(_image("busybox")),
        },
        near={
            "registry port with a tag": _on_main(
                _image("registry.corp.example:5000/shop/cart:4.1.0")
            ),
            "digest": _on_main(_image(f"{REGISTRY}/shop/cart@sha256:" + "3f" * 32)),
            "tag latest-stable": _on_sidecar(_image(f"{REGISTRY}/ops/agent:latest-stable")),
        },
    ),
    K8sCheck(
        id="k8s-resource-limits",
        title="Every container must set CPU and memory limits",
        rego=_ctr_violations("\tnot c.resources.limits.cpu")
        + "\n\n"
        + _ctr_violations("\tnot c.resources.limits.memory"),
        violates=_any_ctr(_limits_missing),
        bad={
            "no limits": _on_main(_resources(None, {"cpu": "100m", "memory": "64Mi"})),
            "memory limit missing": _on_sidecar(_resources({"cpu": "200m"}, None)),
            "init container without limits": _on_init(_resources(None, None)),
        },
        near={
            "limits without requests": _on_main(_resources({"cpu": "1", "memory": "1Gi"}, None)),
        },
    ),
    K8sCheck(
        id="k8s-secret-env",
        title="Secrets must not be exposed through environment variables",
        rego=_ctr_violations("\tsome e in c.env\n\te.valueFrom.secretKeyRef")
        + "\n\n"
        + _ctr_violations("\tsome f in c.envFrom\n\tf.secretRef"),
        violates=_any_ctr(_secret_env),
        bad={
            "secretKeyRef": _on_main(
                _env(
                    {
                        "name": "DB_PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                    }
                )
            ),
            "envFrom secretRef": _on_sidecar(_env_from({"secretRef": {"name": "api-keys"}})),
        },
        near={
            "configMapKeyRef": _on_main(
                _env(
                    {
                        "name": "DB_HOST",
                        "valueFrom": {"configMapKeyRef": {"name": "db", "key": "host"}},
                    }
                )
            ),
            "literal named SECRET_MODE": _on_main(_env({"name": "SECRET_MODE", "value": "file"})),
            "secret mounted as a volume": _volume({"name": "tls", "secret": {"secretName": "tls"}}),
            "envFrom configMapRef": _on_main(_env_from({"configMapRef": {"name": "settings"}})),
        },
    ),
    K8sCheck(
        id="k8s-host-ports",
        title="Containers must not bind host ports",
        rego=_ctr_violations('\tsome p in c.ports\n\tobject.get(p, "hostPort", 0) > 0'),
        violates=_any_ctr(
            lambda c: any((p.get("hostPort") or 0) > 0 for p in c.get("ports") or [])
        ),
        bad={
            "hostPort 8080": _on_main(_ports({"containerPort": 8080, "hostPort": 8080})),
            "sidecar hostPort 9100": _on_sidecar(_ports({"containerPort": 9100, "hostPort": 9100})),
        },
        near={
            "containerPort 80": _on_main(_ports({"containerPort": 80, "protocol": "TCP"})),
            "hostPort 0": _on_main(_ports({"containerPort": 8080, "hostPort": 0})),
        },
    ),
    K8sCheck(
        id="k8s-readonly-rootfs",
        title="Containers must use a read-only root filesystem",
        rego=_ctr_violations("\tnot c.securityContext.readOnlyRootFilesystem == true"),
        violates=_any_ctr(lambda c: _sc_of(c).get("readOnlyRootFilesystem") is not True),
        bad={
            "false": _on_main(_ctr_sc(readOnlyRootFilesystem=False)),
            "absent in init container": _on_init(_ctr_sc(readOnlyRootFilesystem=None)),
        },
        near={"writable emptyDir mounted": _volume({"name": "cache", "emptyDir": {}})},
    ),
    K8sCheck(
        id="k8s-default-service-account",
        title="Pods must not run under the default service account",
        rego=_violations('\tobject.get(pod.spec, "serviceAccountName", "default") == "default"'),
        violates=lambda pod: pod["spec"].get("serviceAccountName", "default") == "default",
        bad={
            "serviceAccountName absent": _drop("spec", "serviceAccountName"),
            "serviceAccountName default": _set("spec", "serviceAccountName", value="default"),
        },
        near={"default-reader": _set("spec", "serviceAccountName", value="default-reader")},
    ),
    # Changed requirements of the policy-update family (usable on their own too).
    K8sCheck(
        id="k8s-image-registry",
        title="Images must be pinned and come from the internal registry",
        rego=_ctr_violations("\tunpinned(c.image)")
        + "\n\n"
        + _ctr_violations(f'\tnot startswith(c.image, "{REGISTRY}/")')
        + """

last_part(image) := parts[count(parts) - 1] if parts := split(image, "/")

unpinned(image) if {
	not contains(image, "@")
	not contains(last_part(image), ":")
}

unpinned(image) if {
	not contains(image, "@")
	endswith(last_part(image), ":latest")
}""",
        violates=_any_ctr(
            lambda c: unpinned_image(c["image"]) or not c["image"].startswith(f"{REGISTRY}/")
        ),
        bad={
            "public registry, pinned": _on_main(_image("docker.io/library/nginx:1.27.2")),
            "internal registry, latest": _on_sidecar(_image(f"{REGISTRY}/ops/agent:latest")),
            "registry with a port": _on_main(_image("registry.corp.example:5000/shop/cart:4.1.0")),
            "look-alike host": _on_init(_image("registry.corp.example.evil.io/x/migrate:1.0")),
        },
        near={
            "digest": _on_main(_image(f"{REGISTRY}/shop/cart@sha256:" + "ab" * 32)),
            "tag latest-stable": _on_sidecar(_image(f"{REGISTRY}/ops/agent:latest-stable")),
        },
    ),
    K8sCheck(
        id="k8s-limits-and-requests",
        title="Every container must set CPU and memory limits and requests",
        rego="\n\n".join(
            _ctr_violations(f"\tnot c.resources.{kind}.{res}")
            for kind in ("limits", "requests")
            for res in ("cpu", "memory")
        ),
        violates=_any_ctr(lambda c: _limits_missing(c) or _requests_missing(c)),
        bad={
            "limits without requests": _on_main(_resources({"cpu": "1", "memory": "1Gi"}, None)),
            "cpu request missing": _on_sidecar(
                _resources({"cpu": "1", "memory": "1Gi"}, {"memory": "512Mi"})
            ),
            "no limits": _on_main(_resources(None, {"cpu": "100m", "memory": "64Mi"})),
        },
        near={
            "requests equal limits": _on_main(
                _resources({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
            )
        },
    ),
    K8sCheck(
        id="k8s-privileged-except-system",
        title="Containers must not run privileged, except in namespace kube-system",
        rego=_ctr_violations(
            '\tc.securityContext.privileged == true\n\tpod.metadata.namespace != "kube-system"'
        ),
        violates=lambda pod: (
            pod["metadata"].get("namespace") != "kube-system"
            and any(_sc_of(c).get("privileged") is True for c in all_containers(pod))
        ),
        bad={
            "privileged container": _on_main(_ctr_sc(privileged=True)),
            "privileged init in kube-public": _both(
                _namespace("kube-public"), _on_init(_ctr_sc(privileged=True))
            ),
        },
        near={
            "privileged in kube-system": _both(
                _namespace("kube-system"), _on_main(_ctr_sc(privileged=True))
            ),
            "privileged init in kube-system": _both(
                _namespace("kube-system"), _on_init(_ctr_sc(privileged=True))
            ),
        },
    ),
    K8sCheck(
        id="k8s-host-namespaces",
        title="Pods must not share the host network, PID or IPC namespaces",
        rego="\n\n".join(
            _violations(f"\tpod.spec.{f} == true") for f in ("hostNetwork", "hostPID", "hostIPC")
        ),
        violates=lambda pod: any(
            pod["spec"].get(f) is True for f in ("hostNetwork", "hostPID", "hostIPC")
        ),
        bad={
            "hostNetwork": _set("spec", "hostNetwork", value=True),
            "hostPID": _set("spec", "hostPID", value=True),
            "hostIPC": _set("spec", "hostIPC", value=True),
        },
        near={
            "all false": _both(
                _set("spec", "hostNetwork", value=False),
                _set("spec", "hostPID", value=False),
                _set("spec", "hostIPC", value=False),
            ),
            "shareProcessNamespace": _set("spec", "shareProcessNamespace", value=True),
        },
    ),
    K8sCheck(
        id="k8s-capabilities-drop-all",
        title="Containers must drop ALL capabilities and add none",
        rego=_ctr_violations(
            '\tcount(object.get(c, ["securityContext", "capabilities", "add"], [])) > 0'
        )
        + "\n\n"
        + _ctr_violations(
            '\tnot "ALL" in object.get(c, ["securityContext", "capabilities", "drop"], [])'
        ),
        violates=_any_ctr(lambda c: bool(_added_caps(c)) or "ALL" not in _dropped_caps(c)),
        bad={
            "adds NET_BIND_SERVICE": _on_main(_caps(add=["NET_BIND_SERVICE"], drop=["ALL"])),
            "drops only NET_RAW": _on_sidecar(_caps(drop=["NET_RAW"])),
            "init drops nothing": _on_init(_caps(drop=None)),
        },
        near={"drops ALL and NET_RAW": _on_main(_caps(drop=["ALL", "NET_RAW"]))},
    ),
]

_PODS = "every container and init container of every pod"

REQUIREMENTS: dict[str, str] = {
    "k8s-host-network": "Pods must not use the host's network namespace (hostNetwork).",
    "k8s-host-pid": "Pods must not share the host's process ID namespace (hostPID).",
    "k8s-host-ipc": "Pods must not share the host's IPC namespace (hostIPC).",
    "k8s-privileged": f"No privileged containers: {_PODS} must not set privileged: true.",
    "k8s-privilege-escalation": (
        f"Privilege escalation must be disabled: {_PODS} must explicitly set "
        "securityContext.allowPrivilegeEscalation to false (the default allows it)."
    ),
    "k8s-run-as-non-root": (
        f"Containers must not run as root: for {_PODS}, the effective runAsNonRoot (the "
        "container's securityContext overrides the pod's) must be true and the effective "
        "runAsUser must not be 0."
    ),
    "k8s-added-capabilities": (
        f"Minimise capabilities: {_PODS} must not add any Linux capability except "
        "NET_BIND_SERVICE (securityContext.capabilities.add)."
    ),
    "k8s-host-path": "Pods must not mount hostPath volumes.",
    "k8s-seccomp": (
        f"Seccomp must be enforced: for {_PODS}, the effective seccomp profile type (the "
        "container's securityContext.seccompProfile overrides the pod's) must be RuntimeDefault "
        "or Localhost."
    ),
    "k8s-default-namespace": "Workloads must not be deployed in the `default` namespace.",
    "k8s-automount-token": (
        "Service account tokens must only be mounted where necessary: every pod must set "
        "spec.automountServiceAccountToken to false."
    ),
    "k8s-image-tag": (
        f"Images must be pinned: the image of {_PODS} must name a tag other than `latest`, or "
        "a digest (`@sha256:...`). An image without a tag means `latest`."
    ),
    "k8s-resource-limits": f"Resource limits are mandatory: {_PODS} must set both CPU and memory limits.",
    "k8s-secret-env": (
        "Secrets must not be passed through environment variables: no container or init "
        "container may use env[].valueFrom.secretKeyRef or envFrom[].secretRef (mounting "
        "secrets as files is allowed)."
    ),
    "k8s-host-ports": f"No host ports: {_PODS} must not set a non-zero hostPort on any port.",
    "k8s-readonly-rootfs": (
        f"Immutable containers: {_PODS} must set securityContext.readOnlyRootFilesystem to true."
    ),
    "k8s-default-service-account": (
        "Pods must not run under the `default` service account (an absent serviceAccountName "
        "means `default`)."
    ),
    "k8s-image-registry": (
        f"Trusted images only: the image of {_PODS} must come from the internal registry "
        f"(its reference starts with `{REGISTRY}/`) and be pinned: a tag other than `latest` "
        "or a digest. An image without a tag means `latest`."
    ),
    "k8s-limits-and-requests": (
        f"Resource management: {_PODS} must set CPU and memory limits and CPU and memory requests."
    ),
    "k8s-privileged-except-system": (
        f"No privileged containers outside the system namespace: {_PODS} must not set "
        "privileged: true, unless the pod runs in namespace `kube-system`."
    ),
    "k8s-host-namespaces": (
        "Pods must not share any host namespace: hostNetwork, hostPID and hostIPC must not be true."
    ),
    "k8s-capabilities-drop-all": (
        f"Drop all capabilities: {_PODS} must drop `ALL` capabilities "
        "(securityContext.capabilities.drop contains ALL) and must not add any."
    ),
}

CHECKS = [dataclasses.replace(c, requirement=REQUIREMENTS[c.id]) for c in CHECKS]
_BY_ID = {c.id: c for c in CHECKS}

_APPS = [
    ("shop", "cart"),
    ("shop", "catalog"),
    ("shop", "checkout"),
    ("payments", "ledger"),
    ("payments", "fraud-scorer"),
    ("monitoring", "node-exporter"),
    ("monitoring", "alert-router"),
    ("ingress", "edge-proxy"),
    ("search", "indexer"),
    ("auth", "token-service"),
    ("batch", "report-builder"),
    ("platform", "config-sync"),
]


@dataclass
class _Namer:
    rng: random.Random
    used: set[str] = field(default_factory=set)

    def pod(self) -> Pod:
        while True:
            ns, app = self.rng.choice(_APPS)
            suffix = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            name = f"{app}-{self.rng.randint(5, 9)}{suffix[:3]}f{suffix[3:]}"
            if name not in self.used:
                self.used.add(name)
                version = (
                    f"{self.rng.randint(1, 4)}.{self.rng.randint(0, 12)}.{self.rng.randint(0, 9)}"
                )
                node = f"worker-{self.rng.randint(1, 3)}"
                return clean_pod(name, ns, app, version, node)


def _make(namer: _Namer, mutation: Mutation | None) -> Pod:
    pod = namer.pod()
    if mutation is not None:
        mutation(pod)
    return pod


def snapshot(pods: list[Pod]) -> dict[str, Any]:
    """The document ``kubectl get pods --all-namespaces -o json`` prints for ``pods``."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])),
        "metadata": {"resourceVersion": ""},
    }


def _distractors(targets: list[K8sCheck]) -> list[tuple[str, Mutation]]:
    """Violations of other checks that do not violate any of ``targets``."""
    out = []
    for other in CHECKS:
        if other in targets:
            continue
        for label, mut in other.bad.items():
            out.append((f"{other.id}: {label}", mut))
    return out


def _variant(
    name: str,
    rng: random.Random,
    namer: _Namer,
    judged: list[K8sCheck],
    bad: list[tuple[str, Mutation]],
    near: list[tuple[str, Mutation]],
    n_clean: int,
    n_distract: int,
) -> Variant:
    pods: list[Pod] = []
    notes: list[str] = []
    for label, mut in bad + near:
        pods.append(_make(namer, mut))
        notes.append(f"{pod_id(pods[-1])}: {label}")
    distract = _distractors(judged)
    for label, mut in rng.sample(distract, min(n_distract, len(distract))):
        pod = _make(namer, mut)
        if any(c.violates(pod) for c in judged):
            continue
        pods.append(pod)
        notes.append(f"{pod_id(pod)}: other requirement ({label})")
    for _ in range(n_clean):
        pods.append(_make(namer, None))
    violating = {pod_id(p) for p in pods if judged[0].violates(p)}
    return Variant(name, snapshot(pods), violating, [pod_id(p) for p in pods], notes)


def variants(
    check_id: str,
    seed: int,
    compliant: int,
    non_compliant: int,
    also: list[str] | None = None,
    visible_seed: int | None = None,
) -> tuple[Variant, list[Variant]]:
    """The visible snapshot and the hidden variants of a check.

    Args:
        check_id: The judged check.
        seed: Seed of the hidden variants' names and choices.
        compliant: Number of hidden variants without violation.
        non_compliant: Number of hidden variants with at least one violating pod.
        also: Other checks whose violations must appear too (policy-update family).
        visible_seed: Seed of the visible snapshot (default ``seed``); a separate seed keeps
            the visible snapshot from telling anything about the hidden ones.

    Returns:
        ``(visible, hidden)``.

    Raises:
        ValueError: a library mutation does not do what it claims (a library bug).
    """
    check = _BY_ID[check_id]
    extra = [_BY_ID[c] for c in also or [] if c != check_id]
    rng = random.Random(f"{check_id}:hidden:{seed}")
    visible_rng = random.Random(
        f"{check_id}:visible:{seed if visible_seed is None else visible_seed}"
    )
    shown = _Namer(visible_rng)
    # Hidden pods never reuse a visible pod's name: a policy that lists names fails.
    namer = _Namer(rng, used=shown.used)
    _self_test(check)
    bad = list(check.bad.items())
    near = list(check.near.items())
    extra_bad = [(f"{c.id}: {lbl}", m) for c in extra for lbl, m in c.bad.items()]
    visible = _variant(
        "visible", visible_rng, shown, [check], bad[:1], near[:1], n_clean=2, n_distract=1
    )
    hidden: list[Variant] = []
    for i in range(compliant):
        nr = [near[(i + j) % len(near)] for j in range(min(2, len(near)))]
        ex = [extra_bad[(i * 2 + j) % len(extra_bad)] for j in range(2)] if extra_bad else []
        hidden.append(_variant(f"v{len(hidden) + 1}", rng, namer, [check], [], nr + ex, 1, 2))
    for i in range(non_compliant):
        picks = [bad[i % len(bad)]]
        if i % 2 == 1 and len(bad) > 1:
            picks.append(bad[(i + 1) % len(bad)])
        nr = [near[i % len(near)]]
        ex = [extra_bad[(i * 2 + 1) % len(extra_bad)]] if extra_bad else []
        hidden.append(_variant(f"v{len(hidden) + 1}", rng, namer, [check], picks, nr + ex, 1, 1))
    rng.shuffle(hidden)
    for i, v in enumerate(hidden):
        v.name = f"v{i + 1}"
    return visible, hidden


def _self_test(check: K8sCheck) -> None:
    probe = clean_pod("probe", "shop", "probe", "1.0.0", "worker-1")
    if check.violates(probe):
        raise ValueError(f"{check.id}: a clean pod violates")
    for label, mut in check.bad.items():
        pod = copy.deepcopy(probe)
        mut(pod)
        if not check.violates(pod):
            raise ValueError(f"{check.id}: mutation {label!r} does not violate")
    for label, mut in check.near.items():
        pod = copy.deepcopy(probe)
        mut(pod)
        if check.violates(pod):
            raise ValueError(f"{check.id}: near miss {label!r} violates")


def by_id(check_id: str) -> K8sCheck:
    """A check of this family."""
    return _BY_ID[check_id]
