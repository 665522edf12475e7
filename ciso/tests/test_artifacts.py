"""Bad artifacts give clear results: uncompilable policies, escaping or slow playbooks."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from itbench_ciso.ansible import playbook_problem
from itbench_ciso.checks import linux
from itbench_ciso.domain import CisoDomain
from itbench_ciso.oracle import reference
from itbench_ciso.sandbox import sandbox_problem
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench.catalog import Catalog
from itbench.testing import processes_under

from .conftest import judge, live, toolbox_and_task

BROKEN = "package compliance\n\nimport rego.v1\n\nviolations contains x if {\n\tx := [1, 2\n}\n"


def test_syntax_error_is_policy_compiles_false_with_the_message_saved(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/k8s-privileged"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        result = judge(domain, spec, env, ctx, CisoSubmission(policy=BROKEN))
        saved = (ctx.trial_dir / "policy-compile.txt").read_text()
    assert not result.passed
    assert result.metrics["policy_compiles"] is False
    assert "policy.rego:6:" in saved and "expecting" in saved
    assert "policy.rego:" in result.details["reason"]


def test_linux_syntax_error_still_reports_evidence(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    playbook = reference(spec).playbook
    with live(domain, spec, tmp_path) as (env, ctx):
        result = judge(domain, spec, env, ctx, CisoSubmission(playbook=playbook, policy=BROKEN))
    assert not result.passed and result.metrics["policy_compiles"] is False
    assert result.metrics["evidence_collected"] == 1.0


def _escaping_playbook(target: Path) -> str:
    return f"""---
- hosts: all
  gather_facts: false
  tasks:
    - name: Write outside the run directory
      ansible.builtin.copy:
        dest: "{target}-{{{{ inventory_hostname }}}}"
        content: escaped
    - name: Evidence
      ansible.builtin.set_fact:
        evidence: {{files: {{}}}}
"""


@pytest.mark.skipif(sandbox_problem() is not None, reason=str(sandbox_problem()))
def test_playbook_writing_outside_its_workspace_is_stopped(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    # A harness directory (not in the sandbox at all) and the trial directory itself.
    target = tmp_path / f"escape-{uuid.uuid4().hex}"
    sub = CisoSubmission(playbook=_escaping_playbook(target), policy=reference(spec).policy)
    with live(domain, spec, tmp_path) as (env, ctx):
        result = judge(domain, spec, env, ctx, sub)
        [hidden_root] = (ctx.trial_dir / "playbook-runs").glob("judge-*-hosts")
        untouched = sorted(p.name for p in hidden_root.iterdir())
    assert not list(tmp_path.glob(f"{target.name}*")), "the playbook wrote outside"
    assert not result.passed
    assert result.metrics["sandboxed"] is True
    assert result.metrics["evidence_collected"] == 0.0
    assert result.details["playbook"]["status"] == "failed"
    assert untouched == [f"host-{i:02d}" for i in range(1, len(untouched) + 1)]


def test_forbidden_playbook_keys_are_refused_before_running(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    assert playbook_problem("- hosts: all\n  become: true\n  tasks: []\n") is not None
    assert "delegate_to" in str(
        playbook_problem("- hosts: all\n  tasks:\n    - ping:\n      delegate_to: other\n")
    )
    assert "YAML" in str(playbook_problem("- hosts: [\n"))
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    sub = CisoSubmission(
        playbook="- hosts: all\n  connection: ssh\n  tasks: []\n", policy=reference(spec).policy
    )
    with live(domain, spec, tmp_path) as (env, ctx):
        result = judge(domain, spec, env, ctx, sub)
    assert not result.passed and result.metrics["evidence_collected"] == 0.0
    assert result.details["playbook"]["status"] == "refused"


def test_playbooks_with_ansible_tags_run(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """``!unsafe`` (a value Ansible never templates) is valid Ansible and is run as such."""
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        # The reference reading the trial's own values (the organization's baseline).
        _, task = toolbox_and_task(domain, spec, env, ctx)
        ref = reference(spec, str(task.context["requirement"]), task.workspace)
        assert ref.playbook is not None
        tagged = ref.playbook.replace(
            "  vars:\n", "  vars:\n    literal: !unsafe '{{ never templated }}'\n", 1
        ).replace(
            "  tasks:\n",
            "  tasks:\n    - name: Show a literal\n      ansible.builtin.debug:\n"
            '        msg: "{{ literal }}"\n',
            1,
        )
        assert "!unsafe" in tagged and "Show a literal" in tagged
        assert playbook_problem(tagged) is None
        result = judge(domain, spec, env, ctx, CisoSubmission(playbook=tagged, policy=ref.policy))
    assert result.details["playbook"]["status"] == "successful", result.details["playbook"]
    assert result.metrics["evidence_collected"] == 1.0
    assert result.passed


def test_playbook_time_limit(domain: CisoDomain, catalog: Catalog, tmp_path: Path) -> None:
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    slow = "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.pause:\n        seconds: 120\n"
    with live(domain, spec, tmp_path, {"playbook_timeout": 3}) as (env, ctx):
        result = judge(
            domain, spec, env, ctx, CisoSubmission(playbook=slow, policy=reference(spec).policy)
        )
    assert not result.passed
    assert result.details["playbook"]["status"] == "timeout"
    assert result.metrics["playbook_seconds"] < 40
    # ansible-playbook runs in a session of its own; nothing of the cut run may survive it.
    left = [str(p) for p in processes_under(tmp_path)]
    assert not left, f"processes of the timed-out playbook survive: {left}"


def test_visible_hosts_and_agent_tools(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The workspace holds the visible hosts and inventory only; the tools run the artifacts."""
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    ref = reference(spec)
    from .conftest import toolbox_and_task

    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        names = sorted(p.name for p in (ctx.workspace / "hosts").iterdir())
        ran = toolbox.call("run_playbook", playbook=ref.playbook)
        verdicts = {
            host: toolbox.call("evaluate_policy", policy=ref.policy, input_document=ev)[
                "violations"
            ]
            for host, ev in ran["evidence"].items()
        }
    assert names == ["host-a", "host-b"]
    assert "host-01" not in task.model_dump_json()
    assert str(ctx.trial_dir) not in task.model_dump_json()
    assert ran["status"] == "successful"
    assert verdicts["host-a"] == [] and verdicts["host-b"]
    assert linux.by_id(spec.check).violates(linux.variants(spec.check, 7, 3, 4)[0][1].data)
