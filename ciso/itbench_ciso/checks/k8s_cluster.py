"""A Kubernetes cluster snapshot: the objects ``kubectl get ... -A -o json`` prints.

A cluster holds namespaces (each with its network policy, default service account and root CA
config map), the default RBAC roles Kubernetes bootstraps, the ``kubernetes`` service, and
applications: a service account, a workload (a bare pod, or a deployment with its replica
pod), a service, a config map and a role with its binding. Every object of a clean cluster
satisfies every check of the library; mutations add or change objects.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

REGISTRY = "registry.corp.example"
#: Kinds whose objects carry a pod template at ``spec.template.spec``.
TEMPLATED = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
#: Namespaces Kubernetes itself creates and manages.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
#: The label Kubernetes puts on the RBAC objects it bootstraps.
BOOTSTRAP = {"kubernetes.io/bootstrapping": "rbac-defaults"}

_APPS = [
    ("shop", "cart"),
    ("shop", "catalog"),
    ("shop", "checkout"),
    ("payments", "ledger"),
    ("payments", "fraud-scorer"),
    ("monitoring", "alert-router"),
    ("ingress", "edge-proxy"),
    ("search", "indexer"),
    ("auth", "token-service"),
    ("batch", "report-builder"),
    ("platform", "config-sync"),
]

_CA = "-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\n-----END CERTIFICATE-----\n"


def ident(obj: Obj) -> str:
    """``Kind/<namespace>/<name>``: the identity scored for an object."""
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"


def _uid(text: str) -> str:
    h = hashlib.sha1(text.encode()).hexdigest()  # an id, not a secret
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def meta(kind: str, name: str, namespace: str | None = None, **extra: Any) -> Obj:
    """An object's head: apiVersion, kind and metadata."""
    api = {
        "Deployment": "apps/v1",
        "CronJob": "batch/v1",
        "NetworkPolicy": "networking.k8s.io/v1",
        "Role": "rbac.authorization.k8s.io/v1",
        "ClusterRole": "rbac.authorization.k8s.io/v1",
        "RoleBinding": "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    }.get(kind, "v1")
    md: Obj = {"name": name, "uid": _uid(f"{kind}/{namespace}/{name}")}
    if namespace is not None:
        md["namespace"] = namespace
    md["creationTimestamp"] = "2026-11-20T08:14:02Z"
    md.update(extra)
    return {"apiVersion": api, "kind": kind, "metadata": md}


def pod_spec_of(obj: Obj) -> dict[str, Any] | None:
    """The pod spec of a pod or of a workload's template."""
    if obj["kind"] == "Pod":
        spec: dict[str, Any] = obj["spec"]
        return spec
    if obj["kind"] in TEMPLATED:
        tmpl: dict[str, Any] = obj["spec"]["template"]["spec"]
        return tmpl
    if obj["kind"] == "CronJob":
        job: dict[str, Any] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return job
    return None


def containers_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Containers, init containers and ephemeral containers of a pod spec."""
    return [
        *spec.get("containers", []),
        *spec.get("initContainers", []),
        *spec.get("ephemeralContainers", []),
    ]


def clean_pod_spec(app: str, namespace: str, version: str, node: str) -> dict[str, Any]:
    """A pod spec that satisfies every check of the library."""
    return {
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
    }


def rule(groups: list[str], resources: list[str], verbs: list[str], **extra: Any) -> Obj:
    """One RBAC policy rule."""
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, **extra}


@dataclass
class Cluster:
    """Objects of one snapshot under construction, with names drawn from ``rng``."""

    rng: random.Random
    used: set[str] = field(default_factory=set)
    objects: list[Obj] = field(default_factory=list)

    # --- names ----------------------------------------------------------------------------------

    def suffix(self, n: int = 5) -> str:
        """Random characters as Kubernetes uses in generated names."""
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))

    def unique(self, base: str) -> str:
        """``base`` with a random suffix, never used before in this run."""
        while True:
            name = f"{base}-{self.suffix()}"
            if name not in self.used:
                self.used.add(name)
                return name

    def app(self) -> tuple[str, str, str]:
        """(namespace, app, version) of a new application."""
        ns, app = self.rng.choice(_APPS)
        version = f"{self.rng.randint(1, 4)}.{self.rng.randint(0, 12)}.{self.rng.randint(0, 9)}"
        return ns, app, version

    # --- objects --------------------------------------------------------------------------------

    def add(self, *objs: Obj) -> None:
        """Add objects."""
        self.objects.extend(objs)

    def find(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object, if any."""
        for o in self.objects:
            md = o["metadata"]
            if o["kind"] == kind and md.get("namespace") == namespace and md["name"] == name:
                return o
        return None

    def remove(self, kind: str, namespace: str | None, name: str | None = None) -> None:
        """Remove the objects of ``kind`` in ``namespace`` (with ``name`` when given)."""
        self.objects = [
            o
            for o in self.objects
            if not (
                o["kind"] == kind
                and o["metadata"].get("namespace") == namespace
                and (name is None or o["metadata"]["name"] == name)
            )
        ]

    def namespace(self, ns: str, policy: bool = True) -> None:
        """Ensure namespace ``ns`` exists with its default objects (and a network policy)."""
        if self.find("Namespace", None, ns) is not None:
            return
        labels = {"kubernetes.io/metadata.name": ns}
        self.add(
            {**meta("Namespace", ns, labels=labels), "status": {"phase": "Active"}},
            {**meta("ServiceAccount", "default", ns)},
            {**meta("ConfigMap", "kube-root-ca.crt", ns), "data": {"ca.crt": _CA}},
        )
        if policy and ns not in SYSTEM_NAMESPACES:
            self.add(
                {
                    **meta("NetworkPolicy", "default-deny", ns),
                    "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
                }
            )

    def service_account(self, ns: str, name: str, automount: bool | None = False) -> None:
        """Ensure a service account exists (``automount`` None leaves the field out)."""
        if self.find("ServiceAccount", ns, name) is not None:
            return
        sa = meta("ServiceAccount", name, ns)
        if automount is not None:
            sa["automountServiceAccountToken"] = automount
        self.add(sa)

    def workload(
        self,
        kind: str = "Pod",
        mutate: Callable[[dict[str, Any]], None] | None = None,
        namespace: str | None = None,
    ) -> Obj:
        """A new application's workload (a pod, a deployment and its replica pod, a cron job).

        ``mutate`` changes the pod spec (the template's, which the replica pod copies).
        Returns the pod or the deployment.
        """
        ns, app, version = self.app()
        ns = namespace or ns
        self.namespace(ns)
        self.service_account(ns, app)
        node = f"worker-{self.rng.randint(1, 3)}"
        spec = clean_pod_spec(app, ns, version, node)
        if mutate is not None:
            mutate(spec)
        labels = {"app": app, "version": version}
        if kind == "Pod":
            pod = {**meta("Pod", self.unique(app), ns, labels=labels), "spec": spec}
            pod["status"] = {"phase": "Running", "podIP": "10.244.1.17", "hostIP": "10.0.0.11"}
            self.add(pod)
            return pod
        name = self.unique(app)
        template_spec = copy.deepcopy(spec)
        template_spec.pop("nodeName", None)
        if kind == "CronJob":
            template_spec["restartPolicy"] = "OnFailure"
            job = {
                **meta("CronJob", name, ns, labels={"app": app}),
                "spec": {
                    "schedule": f"{self.rng.randint(0, 59)} {self.rng.randint(0, 23)} * * *",
                    "concurrencyPolicy": "Forbid",
                    "jobTemplate": {
                        "spec": {
                            "template": {"metadata": {"labels": labels}, "spec": template_spec}
                        }
                    },
                },
            }
            self.add(job)
            return job
        dep = {
            **meta(kind, name, ns, labels={"app": app}),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": labels}, "spec": template_spec},
            },
        }
        rs = f"{name}-{self.rng.randint(5, 9)}{self.suffix(8)}"
        pod = {
            **meta(
                "Pod",
                f"{rs}-{self.suffix()}",
                ns,
                labels=labels,
                ownerReferences=[
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "controller": True}
                ],
            ),
            "spec": spec,
            "status": {"phase": "Running", "podIP": "10.244.2.9", "hostIP": "10.0.0.12"},
        }
        self.add(dep, pod)
        return dep

    def application(self) -> None:
        """A complete clean application: workload, service, config map, role and binding."""
        kind = self.rng.choice(["Pod", "Deployment"])
        wl = self.workload(kind)
        ns, app = wl["metadata"]["namespace"], wl["metadata"]["labels"]["app"]
        self.add(
            {
                **meta("Service", self.unique(app), ns),
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": f"10.96.{self.rng.randint(1, 250)}.{self.rng.randint(2, 250)}",
                    "selector": {"app": app},
                    "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                },
            },
            {
                **meta("ConfigMap", f"{app}-config", ns),
                "data": {"LOG_LEVEL": "info", "FEATURE_FLAGS": "search-v2,fast-checkout"},
            },
            {
                **meta("Role", f"{app}-reader", ns),
                "rules": [rule([""], ["configmaps", "pods"], ["get", "list", "watch"])],
            },
            {
                **meta("RoleBinding", f"{app}-reader", ns),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": f"{app}-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": app, "namespace": ns}],
            },
        )

    def bootstrap(self) -> None:
        """What every cluster has: system namespaces, default roles, the kubernetes service."""
        for ns in ("default", *SYSTEM_NAMESPACES):
            self.namespace(ns)
        self.add(
            {
                **meta("Service", "kubernetes", "default", labels={"component": "apiserver"}),
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": "10.96.0.1",
                    "ports": [{"name": "https", "port": 443, "targetPort": 6443}],
                },
            },
            {
                **meta("ClusterRole", "cluster-admin", labels=dict(BOOTSTRAP)),
                "rules": [rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}],
            },
            {
                **meta("ClusterRole", "admin", labels=dict(BOOTSTRAP)),
                "rules": [
                    rule(
                        [""], ["pods", "secrets", "services"], ["create", "delete", "get", "list"]
                    ),
                    rule([""], ["serviceaccounts"], ["impersonate"]),
                ],
            },
            {
                **meta("ClusterRole", "edit", labels=dict(BOOTSTRAP)),
                "rules": [rule([""], ["pods", "secrets"], ["create", "get", "list", "watch"])],
            },
            {
                **meta("ClusterRole", "view", labels=dict(BOOTSTRAP)),
                "rules": [rule([""], ["pods", "services"], ["get", "list", "watch"])],
            },
            {
                **meta("ClusterRole", "system:controller:token-cleaner", labels=dict(BOOTSTRAP)),
                "rules": [rule([""], ["secrets"], ["delete", "get", "list", "watch"])],
            },
            {
                **meta("ClusterRoleBinding", "cluster-admin", labels=dict(BOOTSTRAP)),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": "system:masters",
                    }
                ],
            },
        )

    def snapshot(self) -> dict[str, Any]:
        """The document ``kubectl get <kinds> --all-namespaces -o json`` prints."""
        order = [
            "Namespace",
            "Pod",
            "Deployment",
            "CronJob",
            "Service",
            "ServiceAccount",
            "ConfigMap",
            "NetworkPolicy",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
        ]

        def key(o: Obj) -> tuple[int, str, str]:
            rank = order.index(o["kind"]) if o["kind"] in order else len(order)
            return rank, o["metadata"].get("namespace", ""), o["metadata"]["name"]

        return {
            "apiVersion": "v1",
            "kind": "List",
            "items": sorted(copy.deepcopy(self.objects), key=key),
            "metadata": {"resourceVersion": ""},
        }
