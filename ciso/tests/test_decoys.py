"""Fixed answers that never read the place the requirement names fail most trials.

Every answer here is one policy (or playbook) for all trials of a scenario: it reads the
organization's values, or its waivers, from wherever they could be (any config map or
namespace annotation under a key of the public lists, any config map with dated lines, every
file under ``/etc`` among the usual paths), never from the place the requirement names. Judged
with the project's own judge on eight drawn trials each, such an answer passes at most one;
the reference, which reads the named place, passes all.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from itbench_ciso.checks import hostparams, k8s, linux, orgparams
from itbench_ciso.domain import CisoDomain
from itbench_ciso.families.kubernetes import updated_set
from itbench_ciso.oracle import reference
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench import testing
from itbench.catalog import Catalog

from .conftest import judge, toolbox_and_task

#: Trials drawn per scenario, and how many of them a fixed answer may pass.
SECRETS = tuple(f"decoy-{i}".encode() for i in range(8))
AT_MOST = 1

_PARAM = re.compile(
    r"^(approved_capabilities|allowed_host_ports|approved_registries|exempt_namespaces"
    r"|max_cpu_millicores) := .*$",
    re.M,
)

#: Waivers from every config map with `namespace date` lines: the namespaces of the two latest.
LATEST_TWO = r"""
waiver_entries contains [ns, d] if {
	some cm in input.items
	cm.kind == "ConfigMap"
	some _, v in object.get(cm, "data", {})
	some line in regex.split(`\r?\n`, v)
	found := regex.find_all_string_submatch_n(`^\s*([a-z0-9][a-z0-9-]*)\s*[:,\s]\s*(\d{4}-\d{2}-\d{2})`, line, 1)
	count(found) == 1
	ns := found[0][1]
	d := found[0][2]
}

waiver_dates := sort([d | some e in waiver_entries; d := e[1]])

waived_namespaces contains e[0] if {
	some e in waiver_entries
	e[1] >= waiver_dates[count(waiver_dates) - 2]
}

violations contains v if {
	some v in raw_violations
	not waived_namespaces[v.namespace]
}
"""


def _tokens(keys: tuple[str, ...], any_config_map: bool) -> str:
    """Rules collecting ``org_tokens``: every value of a config map key or annotation."""
    keyset = "{" + ", ".join(json.dumps(k) for k in keys) + "}"
    in_keys = "" if any_config_map else f"\tk in {keyset}\n"
    return f"""
org_tokens contains t if {{
	some o in input.items
	o.kind == "ConfigMap"
	some k, v in object.get(o, "data", {{}})
{in_keys}	some t in regex.split(`[,\\s]+`, v)
	t != ""
}}

org_tokens contains t if {{
	some o in input.items
	o.kind == "Namespace"
	some k, v in object.get(o.metadata, "annotations", {{}})
	some key in {keyset}
	endswith(k, concat("", ["/", key]))
	some t0 in split(v, ",")
	t := trim_space(t0)
	t != ""
}}
"""


def collecting(check_id: str, any_config_map: bool = False) -> str:
    """The reference policy of ``check_id`` with its values gathered from every likely place.

    Args:
        check_id: A check with organization parameters.
        any_config_map: Take every config map key, not only the public key names.
    """
    kind = orgparams.KINDS[check_id]
    policy = orgparams.policy(check_id, kind.draw(random.Random(0)))
    found = _PARAM.search(policy)
    assert found is not None, check_id
    name = found.group(1)
    if name == "allowed_host_ports":
        rule = (
            "allowed_host_ports contains to_number(t) if { some t in org_tokens; "
            "regex.match(`^[0-9]+$`, t) }"
        )
    elif name == "max_cpu_millicores":
        rule = (
            "max_cpu_millicores := max({millicores(t) | some t in org_tokens; "
            "regex.match(`^[0-9.]+m?$`, t)})"
        )
    else:
        rule = f"{name} contains t if some t in org_tokens"
    return _PARAM.sub(lambda _: rule, policy) + "\n" + _tokens(kind.keys, any_config_map)


def latest_two(policy: str) -> str:
    """``policy`` waiving the namespaces of the two latest dated lines of any config map."""
    renamed = re.sub(r"^violations contains\b", "raw_violations contains", policy, flags=re.M)
    return renamed.rstrip() + "\n" + LATEST_TWO


def _answer(spec: CisoSpec, policy: str) -> CisoSubmission:
    """``policy`` submitted as the scenario's family expects it."""
    if spec.changed:
        return CisoSubmission(
            policies=updated_set(spec.policy_set, spec.changed, spec.check, policy)
        )
    return CisoSubmission(policy=policy)


@pytest.mark.parametrize(
    ("scenario", "any_config_map"),
    [
        ("ciso/k8s-host-ports", False),
        ("ciso/k8s-resource-limits", False),
        ("ciso/k8s-host-namespaces", True),
        ("ciso/update-image-tag-image-registry", False),
        ("ciso/update-added-capabilities-capabilities-drop-all", True),
    ],
)
def test_values_gathered_from_every_config_map_and_annotation_fail(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str, any_config_map: bool
) -> None:
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec) and spec.check in orgparams.KINDS
    gathered = collecting(spec.check, any_config_map)
    if k8s.waivable(spec.check) and not spec.changed:
        gathered = latest_two(gathered)
    passes = 0
    for secret in SECRETS:
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            right = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            fixed = judge(domain, spec, env, ctx, _answer(spec, gathered))
        assert right.passed, (secret, right.details)
        assert fixed.metrics["policy_compiles"], fixed.details
        passes += fixed.passed
    assert passes <= AT_MOST, (scenario, passes)


@pytest.mark.parametrize("scenario", ["ciso/k8s-seccomp", "ciso/k8s-added-capabilities"])
def test_the_two_latest_waivers_of_any_config_map_fail(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, scenario: str
) -> None:
    """The organization's values read right, the waivers taken from the two latest dates."""
    spec = catalog.scenarios[scenario]
    assert isinstance(spec, CisoSpec) and k8s.waivable(spec.check)
    passes = 0
    for secret in SECRETS:
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            right = reference(spec, requirement, task.workspace)
            assert right is not None and right.policy
            wrong = re.sub(r'waiver_today := "[^"]*"\n\n(?s:.*)', "", right.policy)
            wrong = re.sub(r"^raw_violations contains\b", "violations contains", wrong, flags=re.M)
            judged = judge(domain, spec, env, ctx, right)
            fixed = judge(domain, spec, env, ctx, CisoSubmission(policy=latest_two(wrong)))
        assert judged.passed, (secret, judged.details)
        assert fixed.metrics["policy_compiles"], fixed.details
        passes += fixed.passed
    assert passes <= AT_MOST, (scenario, passes)


def test_ports_gathered_from_every_usual_file_fail(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios[f"ciso/{hostparams.CHECK}"]
    assert isinstance(spec, CisoSpec)
    base = linux.by_id(hostparams.CHECK)
    files = ("/proc/net/tcp", "/proc/net/tcp6", *hostparams.PATHS)
    playbook = linux.playbook_for(files, (), (), base.commands)
    policy = (
        "package compliance\n\nimport rego.v1\n\n"
        + base.rego.replace("not port in {22, 443}", "not port in approved_ports")
        + """

approved_ports contains to_number(p) if {
	some path, text in input.files
	startswith(path, "/etc/")
	some line in split(text, "\\n")
	body := split(line, "#")[0]
	some p in regex.find_n(`[0-9]+`, body, -1)
}
"""
    )
    assert policy != base.rego
    passes = 0
    for secret in SECRETS[:4]:
        with testing.live_environment(
            domain, spec, tmp_path / secret.decode(), until="setup", secret=secret
        ) as (env, ctx):
            _, task = toolbox_and_task(domain, spec, env, ctx)
            requirement = str(task.context["requirement"])
            right = judge(domain, spec, env, ctx, reference(spec, requirement, task.workspace))
            fixed = judge(domain, spec, env, ctx, CisoSubmission(playbook=playbook, policy=policy))
        assert right.passed, (secret, right.details)
        assert fixed.metrics.get("evidence_collected"), fixed.details
        passes += fixed.passed
    assert passes == 0


def test_documents_place_the_marked_list_by_the_trial_not_the_path(tmp_path: Path) -> None:
    """Two trials with the same document path differ in where the marked list is and its mark."""
    layouts: dict[str, set[tuple[bool, str]]] = {}
    second = 0
    for seed in range(60):
        org = orgparams.draw("k8s-image-registry", random.Random(seed))
        assert org is not None
        if org.home.kind != "document":
            continue
        docs = org.documents()
        text = docs[org.home.name]
        headings = re.findall(r"^## (.+)$", text, flags=re.M)
        marked = next(h for h in headings if h.startswith(org.kind.heading + " ("))
        first = headings.index(marked) < headings.index(org.home.key)
        layouts.setdefault(org.home.name, set()).add((first, marked))
        second += len(docs) > 1
        workspace = tmp_path / str(seed)
        for rel, body in docs.items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(body, encoding="utf-8")
        read = orgparams.read(org.requirement(), {"items": []}, workspace)
        assert read == org.values
    assert any(len({f for f, _ in seen}) == 2 for seen in layouts.values())
    assert any(len({m for _, m in seen}) > 1 for seen in layouts.values())
    assert second > 0
