"""Kubernetes policy generation and policy update: cluster snapshots judged per object."""

from __future__ import annotations

import json
import random
from typing import Any

from itbench import Evaluation, Tool, ToolError
from itbench_ciso.checks import k8s, orgparams, waivers
from itbench_ciso.contracts import KUBERNETES, POLICY_UPDATE
from itbench_ciso.engine import PACKAGE, RULE, PolicyError
from itbench_ciso.families import Runtime, digest, timer
from itbench_ciso.scoring import Confusion, evaluation, judge_resources
from itbench_ciso.spec import CisoSubmission

SNAPSHOT_FILE = "cluster/snapshot.json"

#: ``kubectl get`` resource names (and short names) of the kinds a snapshot holds.
RESOURCES = {
    "Namespace": ("namespaces", "namespace", "ns"),
    "Pod": ("pods", "pod", "po"),
    "Deployment": ("deployments", "deployment", "deploy"),
    "CronJob": ("cronjobs", "cronjob", "cj"),
    "Service": ("services", "service", "svc"),
    "ServiceAccount": ("serviceaccounts", "serviceaccount", "sa"),
    "ConfigMap": ("configmaps", "configmap", "cm"),
    "NetworkPolicy": ("networkpolicies", "networkpolicy", "netpol"),
    "Role": ("roles", "role"),
    "RoleBinding": ("rolebindings", "rolebinding"),
    "ClusterRole": ("clusterroles", "clusterrole"),
    "ClusterRoleBinding": ("clusterrolebindings", "clusterrolebinding"),
}
_KIND_OF = {name: kind for kind, names in RESOURCES.items() for name in names}


def identity(item: Any) -> str | None:
    """A returned violation as ``Kind/<namespace>/<name>``, or ``None`` if unrecognisable.

    Accepted: an object with ``kind`` and ``name`` (and ``namespace``; a missing kind means
    ``Pod``), an object with ``metadata``, or a string ``Kind/namespace/name`` or
    ``namespace/name`` (a pod).
    """
    if isinstance(item, dict):
        inner = item.get("metadata")
        meta: dict[str, Any] = inner if isinstance(inner, dict) else item
        name = meta.get("name")
        if not isinstance(name, str):
            return None
        kind = item.get("kind") or "Pod"
        return f"{kind}/{meta.get('namespace') or ''}/{name}"
    if isinstance(item, str):
        parts = item.split("/")
        if len(parts) == 3:
            return item
        if len(parts) == 2:
            return f"Pod/{parts[0]}/{parts[1]}"
    return None


def flagged_ids(value: Any) -> set[str]:
    """Identities of a ``violations`` value (a set arrives as a list; an object's keys count)."""
    if value is None:
        return set()
    items = list(value) if isinstance(value, (list, dict)) else [value]
    out = set()
    for item in items:
        ident = identity(item)
        out.add(ident if ident is not None else f"?/{json.dumps(item, sort_keys=True)[:80]}")
    return out


def package_of(policy_set: list[str], check_id: str) -> str:
    """Rego package of a policy of a policy set: ``compliance.control_<NN>`` by its position.

    Names are neutral: what a policy enforces is in its source, not in its name.
    """
    return f"{PACKAGE}.control_{policy_set.index(check_id) + 1:02d}"


def file_of(policy_set: list[str], check_id: str) -> str:
    """File name of a policy of a policy set (``control-<NN>.rego``)."""
    return f"control-{policy_set.index(check_id) + 1:02d}.rego"


def _documented(check_id: str, package: str, policy: str | None = None) -> str:
    """A check's reference policy in ``package``, its requirement as the leading comment.

    ``policy`` (in package ``compliance``) replaces the library's reference policy.
    """
    check = k8s.by_id(check_id)
    source = check.policy(package)
    if policy is not None:
        source = policy.replace(f"package {PACKAGE}\n", f"package {package}\n", 1)
    return f"# Requirement: {check.requirement}\n{source}"


def original_set(policy_set: list[str]) -> dict[str, str]:
    """The reference policies of ``policy_set``, file name -> source."""
    return {file_of(policy_set, c): _documented(c, package_of(policy_set, c)) for c in policy_set}


def updated_set(
    policy_set: list[str], changed: str, new_check: str, policy: str | None = None
) -> dict[str, str]:
    """``policy_set`` with ``changed`` enforcing ``new_check`` instead (same file and package).

    ``policy`` (package ``compliance``) is the new policy when given (one with the
    organization's values), else the library's reference policy of ``new_check``.
    """
    policies = original_set(policy_set)
    policies[file_of(policy_set, changed)] = _documented(
        new_check, package_of(policy_set, changed), policy or None
    )
    return policies


class KubernetesRuntime(Runtime):
    """A pod snapshot served through ``kubectl_get``; the agent writes one Rego policy.

    The trial's organization waives the requirement for some namespaces until a date
    (:mod:`itbench_ciso.checks.waivers`): where it keeps its waivers, how it writes them and
    which day is today are drawn per trial and stated in the requirement. For a check with
    organization parameters (:mod:`itbench_ciso.checks.orgparams`), the organization's values,
    where it keeps them and how the requirement words them are drawn too.
    """

    #: Whether the trial's organization keeps waivers (not for a policy set's update).
    waivers_apply = True
    #: The requirement's sentence on the trial's waivers (none until set-up draws them).
    _waiver_sentence = ""
    #: The requirement with the organization's parameters (none until set-up draws them).
    _org_requirement = ""

    @property
    def requirement(self) -> str:
        """The requirement as this trial states it (with the organization's values, waivers)."""
        base = self._org_requirement or self.spec.requirement
        return f"{base} {self._waiver_sentence}".strip()

    def setup(self) -> None:
        """Generate the visible snapshot and the hidden ones; write the visible one."""
        plan = self.spec.variants
        drawn = None
        if self.waivers_apply and k8s.waivable(self.spec.check):
            drawn = waivers.draw(random.Random(self.ctx.secret_seed("ciso:waivers")))
            self._waiver_sentence = drawn.sentence()
        org = orgparams.draw(self.spec.check, random.Random(self.ctx.secret_seed("ciso:org")))
        if org is not None:
            self._org_requirement = org.requirement()
        self.visible, self.hidden = k8s.variants(
            self.spec.check,
            self.hidden_seed,
            plan.compliant,
            plan.non_compliant,
            also=self.spec.policy_set or None,
            visible_seed=self.visible_seed,
            waivers=drawn,
            judged=org.check() if org is not None else None,
            org_objects=org.objects() if org is not None else None,
        )
        path = self.workspace / SNAPSHOT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.visible.data, indent=1), encoding="utf-8")
        for rel, text in (org.documents() if org is not None else {}).items():
            doc = self.workspace / rel
            doc.parent.mkdir(parents=True, exist_ok=True)
            doc.write_text(text, encoding="utf-8")

    def _snapshot(self) -> dict[str, Any]:
        assert self.visible is not None
        return dict(self.visible.data)

    def tools(self) -> list[Tool]:
        """``kubectl_get`` and ``evaluate_policy``."""

        def kubectl_get(resource: str = "all", namespace: str | None = None) -> dict[str, Any]:
            """Return what `kubectl get <resource> [-n NS | -A] -o json` prints for the cluster.

            resource: a resource name or short name (pods, deployments, cronjobs, services,
            serviceaccounts, configmaps, networkpolicies, namespaces, roles, rolebindings,
            clusterroles, clusterrolebindings), several separated by commas, or `all` for every
            object of the snapshot (the policy's input). namespace None means all namespaces.
            """
            kinds = set()
            for name in resource.lower().replace(" ", "").split(","):
                if name == "all":
                    kinds |= set(RESOURCES)
                elif name in _KIND_OF:
                    kinds.add(_KIND_OF[name])
                else:
                    served = ", ".join(names[0] for names in RESOURCES.values())
                    raise ToolError(
                        f"resource {name!r} is not in this snapshot; served: {served}, all"
                    )
            snap = self._snapshot()
            snap["items"] = [
                o
                for o in snap["items"]
                if o["kind"] in kinds
                and (not namespace or o["metadata"].get("namespace") == namespace)
            ]
            return snap

        return [Tool.from_function(kubectl_get), self.policy_tool(self._snapshot)]

    def context(self) -> dict[str, Any]:
        """The policy contract."""
        return {
            "requirement": self.requirement,
            "cluster_snapshot": str(self.workspace / SNAPSHOT_FILE),
            "policy_contract": KUBERNETES.contract,
        }

    def judge(self, submission: CisoSubmission | None) -> Evaluation:
        """Evaluate the policy on every hidden snapshot; pass when every set matches."""
        start = timer()
        policy = submission.policy if submission else None
        if not policy:
            return self._nothing(start, "no policy submitted")
        modules = {"policy.rego": policy}
        error = self.compile_policy(modules)
        if error is not None:
            return self._nothing(start, error, compiles=False)
        verdicts = self.engine.judge_query(
            modules, f"data.{PACKAGE}.{RULE}", [v.data for v in self.hidden]
        )
        flagged: list[set[str] | None] = [
            None if r.error else flagged_ids(r.value) for r in verdicts
        ]
        conf, judgements = judge_resources(self.hidden, flagged, [r.error for r in verdicts])
        return evaluation(
            conf, judgements, compiles=True, engine=self.engine.name, seconds=timer() - start
        )

    def _nothing(self, start: float, why: str, compiles: bool = False) -> Evaluation:
        conf = Confusion()
        for v in self.hidden:
            for unit in v.units:
                conf.add(unit in v.violating, False)
        return evaluation(
            conf,
            [],
            compiles=compiles,
            engine=self.engine.name,
            seconds=timer() - start,
            details={"reason": why},
        )


class UpdateRuntime(KubernetesRuntime):
    """An existing policy set plus a changed requirement for one of its policies."""

    waivers_apply = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._before: list[list[set[str]]] | None = None
        self._original: dict[str, str] = {}

    def original(self) -> dict[str, str]:
        """The existing policy set, file name -> source (as setup wrote it)."""
        return dict(self._original)

    def setup(self) -> None:
        """Snapshots as for Kubernetes, plus the policy set in the workspace."""
        super().setup()
        self._original = original_set(self.spec.policy_set)
        folder = self.workspace / "policies"
        folder.mkdir(parents=True, exist_ok=True)
        for name, source in self._original.items():
            (folder / name).write_text(source, encoding="utf-8")

    def fingerprint(self) -> dict[str, str]:
        """The hidden variants and the original policy set the judge compares against."""
        return {**super().fingerprint(), "original_policy_set": digest(self._original)}

    def tools(self) -> list[Tool]:
        """Kubernetes tools plus ``read_policies``."""

        def read_policies() -> dict[str, str]:
            """Return the existing policy set: file name -> Rego source."""
            return self.original()

        return [*super().tools(), Tool.from_function(read_policies)]

    def context(self) -> dict[str, Any]:
        """The update contract."""
        assert self.spec.changed is not None
        return {
            "requirement": self.requirement,
            "cluster_snapshot": str(self.workspace / SNAPSHOT_FILE),
            "policy_set": str(self.workspace / "policies"),
            "policy_files": sorted(self.original()),
            "policy_contract": POLICY_UPDATE.contract,
        }

    def judge(self, submission: CisoSubmission | None) -> Evaluation:
        """Judge the changed policy on hidden variants and compare the others to the originals."""
        start = timer()
        assert self.spec.changed is not None
        policies = dict(submission.policies) if submission else {}
        if not policies:
            return self._nothing(start, "no policy set submitted")
        error = self.compile_policy(policies)
        if error is not None:
            return self._nothing(start, error, compiles=False)
        docs = [v.data for v in self.hidden]
        pset = self.spec.policy_set
        others = [c for c in pset if c != self.spec.changed]
        queries = [f"data.{package_of(pset, c)}.{RULE}" for c in [self.spec.changed, *others]]
        try:
            rows = self.engine.judge(policies, queries, docs)
        except PolicyError as exc:
            return self._nothing(start, str(exc), compiles=False)
        answers = [row[0] for row in rows]
        flagged: list[set[str] | None] = [
            None if r.error else flagged_ids(r.value) for r in answers
        ]
        conf, judgements = judge_resources(self.hidden, flagged, [r.error for r in answers])
        before = self._original_verdicts(others, docs)
        drift: dict[str, list[str]] = {}
        for v, row, base in zip(self.hidden, rows, before, strict=True):
            for cid, after, orig in zip(others, row[1:], base, strict=True):
                if after.error or flagged_ids(after.value) != orig:
                    drift.setdefault(file_of(pset, cid), []).append(v.name)
        unchanged = not drift
        return evaluation(
            conf,
            judgements,
            compiles=True,
            engine=self.engine.name,
            seconds=timer() - start,
            extra={
                "other_policies_unchanged": unchanged,
                "other_policies_changed": len(drift),
                "other_policies": len(others),
            },
            details={"changed_verdicts": drift},
            gate=unchanged,
        )

    def _original_verdicts(self, others: list[str], docs: list[Any]) -> list[list[set[str]]]:
        """What the unchanged policies flag on each hidden variant (computed once)."""
        if self._before is None:
            queries = [f"data.{package_of(self.spec.policy_set, c)}.{RULE}" for c in others]
            rows = self.engine.judge(self.original(), queries, docs)
            self._before = [[flagged_ids(r.value) for r in row] for row in rows]
        return self._before

    def _nothing(self, start: float, why: str, compiles: bool = False) -> Evaluation:
        ev = super()._nothing(start, why, compiles)
        ev.metrics["other_policies_unchanged"] = False
        return ev
