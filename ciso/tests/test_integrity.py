"""What an agent can reach tells it nothing of the scenario and cannot change its score.

Every check runs the real parts: the Rego engine's worker, ansible-runner and collectors in the
sandbox, a moto server over HTTP.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from itbench_ciso.aws import MotoServer
from itbench_ciso.checks import all_checks, cloud
from itbench_ciso.domain import CisoDomain
from itbench_ciso.families.cloud import CloudRuntime
from itbench_ciso.oracle import reference
from itbench_ciso.sandbox import sandbox_problem
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench import InfrastructureError, IntegrityError, port_open
from itbench.catalog import Catalog
from itbench.domain import TrialContext
from itbench.testing import free_port

from .conftest import judge, live, toolbox_and_task

needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=str(sandbox_problem()))

MARKER = "ITBENCH_TEST_MARKER_7f3a"
MARKER_VALUE = "harness-secret-value-91c2"
#: All the engine's worker has in its environment: the locale Python sets for itself.
ENGINE_ENV = {"LC_CTYPE"}

RUNTIME_POLICY = """package compliance

import rego.v1

env := opa.runtime().env

violations contains {"kind": "Pod", "namespace": k, "name": v} if {
	some k, v in opa.runtime().env
}
"""
# The value reaches an error message if the engine can see it.
RUNTIME_ERROR_POLICY = """package compliance

import rego.v1

violations contains x if {
	x := to_number(opa.runtime().env.ITBENCH_TEST_MARKER_7f3a)
}
"""
RUNTIME_SYSTEM_POLICY = """package compliance

import rego.v1

violations contains k if {
	some k, _ in opa.runtime().env
}
"""

ENV_COLLECTOR = "import json, os\nprint(json.dumps(dict(os.environ)))\n"
ENV_PLAYBOOK = """---
- hosts: all
  gather_facts: false
  tasks:
    - name: Record the environment
      ansible.builtin.set_fact:
        evidence:
          marker: "{{ lookup('ansible.builtin.env', 'ITBENCH_TEST_MARKER_7f3a') }}"
          shell: "{{ lookup('ansible.builtin.pipe', 'env') }}"
"""


def _text(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable of the harness's environment that no agent-reachable output may show."""
    monkeypatch.setenv(MARKER, MARKER_VALUE)


def _assert_no_marker(*texts: str) -> None:
    for text in texts:
        assert MARKER not in text and MARKER_VALUE not in text, text[:2000]


def test_opa_runtime_shows_nothing_of_the_harness_kubernetes(
    marker: None, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/k8s-host-namespaces"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        shown = toolbox.call("evaluate_policy", policy=RUNTIME_POLICY)
        failed = toolbox.call("evaluate_policy", policy=RUNTIME_ERROR_POLICY)
        # The engine answered (the policy ran), it just saw an empty environment (but for
        # the locale the interpreter sets for itself).
        assert shown["compiles"] is True, shown
        assert {v["namespace"] for v in shown["violations"]} <= ENGINE_ENV, shown
        verdicts = [
            judge(domain, spec, env, ctx, CisoSubmission(policy=p))
            for p in (RUNTIME_POLICY, RUNTIME_ERROR_POLICY)
        ]
        saved = [p.read_text(errors="replace") for p in ctx.trial_dir.rglob("*") if p.is_file()]
    assert os.environ[MARKER] == MARKER_VALUE
    _assert_no_marker(_text(shown), _text(failed), task.model_dump_json(), *saved)
    for v in verdicts:
        assert not v.passed
        _assert_no_marker(v.model_dump_json())


def test_opa_runtime_shows_nothing_of_the_harness_update(
    marker: None, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/update-image-tag-image-registry"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        policies = toolbox.call("read_policies")
        first = sorted(policies)[0]
        policies[first] = RUNTIME_POLICY.replace(
            "package compliance", policies[first].split("\n")[1]
        )
        result = judge(domain, spec, env, ctx, CisoSubmission(policies=policies))
    assert not result.passed
    _assert_no_marker(result.model_dump_json())


@needs_sandbox
def test_collectors_and_playbooks_see_nothing_of_the_harness_environment(
    marker: None, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/cloud-password-policy"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        collected = toolbox.call("run_collector", script=ENV_COLLECTOR)
        played = toolbox.call("run_playbook", playbook=ENV_PLAYBOOK)
        shown = toolbox.call("evaluate_policy", policy=RUNTIME_SYSTEM_POLICY)
        result = judge(
            domain,
            spec,
            env,
            ctx,
            CisoSubmission(collector=ENV_COLLECTOR, policy=RUNTIME_SYSTEM_POLICY),
        )
    assert collected["problem"] is None and "AWS_ENDPOINT_URL" in collected["evidence"]
    assert played["status"] == "successful" and played["evidence"]["marker"] == ""
    assert shown["compiles"] is True and set(shown["violations"]) <= ENGINE_ENV
    assert not result.passed and result.metrics["evidence_collected"] == 1.0
    _assert_no_marker(_text(collected), _text(played), _text(shown), result.model_dump_json())


# --- what a collector or playbook can reach ----------------------------------------------------

PROBE_COLLECTOR = """
import json, os, sys, urllib.request
out = {}
def attempt(name, fn):
    try:
        out[name] = ("open", str(fn())[:300])
    except Exception as exc:
        out[name] = ("blocked", type(exc).__name__)
attempt("import_library", lambda: __import__("itbench_ciso.checks").__file__)
attempt("import_core", lambda: __import__("itbench").__file__)
attempt("repository", lambda: os.listdir(REPO + "/scenarios"))
attempt("library_source", lambda: open(REPO + "/ciso/itbench_ciso/checks/k8s.py").read())
attempt("trial_dir", lambda: os.listdir(TRIAL))
attempt("hidden_truth", lambda: open(TRIAL + "/hidden-variants.json").read())
attempt("workspace", lambda: os.listdir(WORKSPACE))
attempt("write_usr", lambda: open("/usr/itbench-escape", "w"))
attempt("harness_pid", lambda: open("/proc/%d/cmdline" % HARNESS).read())
attempt("kill_endpoint", lambda: os.kill(SERVER, 9))
attempt("other_port", lambda: urllib.request.urlopen("http://127.0.0.1:%d/" % OTHER, timeout=3))
processes = [p for p in os.listdir("/proc") if p.isdigit()]
out["processes"] = len(processes)
out["uid"] = os.getuid()
print(json.dumps(out))
"""


def _probe_script(ctx: TrialContext, server_pid: int, other_port: int) -> str:
    repo = Path(__file__).resolve().parents[2]
    head = (
        f"REPO = {str(repo)!r}\nTRIAL = {str(ctx.trial_dir)!r}\n"
        f"WORKSPACE = {str(ctx.workspace)!r}\nHARNESS = {os.getpid()}\n"
        f"SERVER = {server_pid}\nOTHER = {other_port}\n"
    )
    return head + PROBE_COLLECTOR


@needs_sandbox
def test_a_collector_reaches_nothing_but_its_endpoint(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """During the agent's turn and when judging: no library, no ground truth, no harness
    process, no other port; the endpoint survives, and the judge stays valid."""
    import http.server
    import threading

    spec = catalog.scenarios["ciso/cloud-password-policy"]
    assert isinstance(spec, CisoSpec)
    other = http.server.HTTPServer(("127.0.0.1", free_port()), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with live(domain, spec, tmp_path) as (env, ctx):
            runtime = env.runtime
            assert runtime is not None
            server = runtime.server  # type: ignore[attr-defined]
            assert server.process.proc is not None
            script = _probe_script(ctx, server.process.proc.pid, other.server_address[1])
            toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
            before = env.fingerprint()
            seen = toolbox.call("run_collector", script=script)
            problems = env.harness_problems()
            result = judge(
                domain,
                spec,
                env,
                ctx,
                CisoSubmission(collector=script, policy=RUNTIME_SYSTEM_POLICY),
            )
            after = env.fingerprint()
            judged = json.loads(
                (ctx.trial_dir / "collector-runs" / "judge-account-01.stdout").read_text()
            )
    finally:
        other.shutdown()
    assert problems == [] and before == after
    for evidence in (seen["evidence"], judged):
        assert evidence["uid"] != 0 and evidence["processes"] <= 4, evidence
        for name in (
            "import_library",
            "import_core",
            "repository",
            "trial_dir",
            "hidden_truth",
            "workspace",
            "write_usr",
            "harness_pid",
            "kill_endpoint",
            "other_port",
        ):
            assert evidence[name][0] == "blocked", (name, evidence[name])
    assert not result.passed and result.metrics["evidence_collected"] == 1.0


def _kill_server(env: Any) -> None:
    proc = env.runtime.server.process.proc
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_dead_endpoint_is_a_harness_problem(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/cloud-ebs-encryption"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, _):
        assert env.harness_problems() == []
        _kill_server(env)
        problems = env.harness_problems()
    assert len(problems) == 1 and "AWS endpoint" in problems[0]


def test_judging_uses_a_fresh_endpoint(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """What the agent left in the endpoint is gone when the hidden accounts are built (the
    oracle still passes); moto's admin API and its account header are refused to the agent."""
    spec = catalog.scenarios["ciso/cloud-s3-versioning"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        url = task.context["endpoint_url"]
        assert url.startswith("http://127.0.0.1:")
        for path in ("/moto-api/seed?a=42", "/moto-api/reset", "/moto-api/data.json"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{url}{path}", data=b"", timeout=10)
            assert refused.value.code == 403, path
        # Any account without credentials, through moto's account header: refused too.
        other = urllib.request.Request(
            f"{url}/?Action=ListUsers&Version=2010-05-08",
            headers={"x-moto-account-id": "210987654321"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(other, timeout=10)
        assert refused.value.code == 403
        before = env.runtime.server.process.proc.pid  # type: ignore[union-attr]
        spare = env.runtime.spare.process.proc.pid  # type: ignore[union-attr]
        result = domain.evaluate(spec, env, domain.oracle(spec, task, toolbox), toolbox, ctx)
        after = env.runtime.server.process.proc.pid  # type: ignore[union-attr]
    assert result.passed, result.details
    # The spare launched at setup, woken once the agent's server was gone.
    assert before != after == spare


@pytest.mark.parametrize("how", ["woken early", "killed"])
def test_a_spare_endpoint_tampered_with_is_not_the_judge_s(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, how: str
) -> None:
    """The judge's endpoint waits unbound during the agent's turn; an agent that wakes it
    while its own server holds the port, or kills it, only costs the judge a fresh start."""
    spec = catalog.scenarios["ciso/cloud-s3-versioning"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        spare = env.runtime.spare  # type: ignore[union-attr]
        assert spare is not None and spare.alive()
        assert spare.process.proc is not None
        spare.process.proc.send_signal(signal.SIGUSR1 if how == "woken early" else signal.SIGKILL)
        spare.process.proc.wait(timeout=60)  # the port is taken: the woken spare exits
        assert env.harness_problems() == []
        result = domain.evaluate(spec, env, domain.oracle(spec, task, toolbox), toolbox, ctx)
        server = env.runtime.server  # type: ignore[union-attr]
    assert result.passed, result.details
    assert server is not spare and server.process.proc is not None
    assert server.process.proc.pid != spare.process.proc.pid


def test_a_usurper_of_the_endpoint_s_port_is_never_judged_on(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A server that takes the endpoint's port is told apart from the harness's (it cannot
    answer the identity challenge), and the judge refuses to collect from it."""
    spec = catalog.scenarios["ciso/cloud-s3-versioning"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        runtime = env.runtime
        assert runtime.harness_problems() == []  # type: ignore[union-attr]
        port = runtime.server.port  # type: ignore[union-attr]
        runtime.server.process.proc.kill()  # type: ignore[union-attr]
        runtime.server.process.proc.wait(timeout=10)  # type: ignore[union-attr]

        class Anything(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the handler's protocol
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"\xff\xfe not ascii")

            def log_message(self, *args: Any) -> None:
                pass

        usurper = http.server.ThreadingHTTPServer(("127.0.0.1", port), Anything)
        threading.Thread(target=usurper.serve_forever, daemon=True).start()
        try:
            assert env.harness_problems() != []
            # The identity challenge is what tells the two apart.
            assert any("another server" in p for p in runtime.server.identity_problems())  # type: ignore[union-attr]
            with pytest.raises(InfrastructureError, match="did not start"):
                domain.evaluate(spec, env, domain.oracle(spec, task, toolbox), toolbox, ctx)
        finally:
            usurper.shutdown()
            usurper.server_close()


def test_an_endpoint_replaced_while_the_judge_collects_makes_the_trial_invalid(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evidence counts only if the harness's endpoint still held the port once collected."""
    spec = catalog.scenarios["ciso/cloud-s3-versioning"]
    assert isinstance(spec, CisoSpec)
    collect = CloudRuntime._judge_collect

    done: list[str] = []

    def and_kill_the_endpoint(self: CloudRuntime, *args: Any) -> Any:
        out = collect(self, *args)
        done.append(args[1])
        if len(done) == len(self.hidden):  # the last account's evidence is in
            assert self.server.process.proc is not None
            self.server.process.proc.kill()
        return out

    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        monkeypatch.setattr(CloudRuntime, "_judge_collect", and_kill_the_endpoint)
        with pytest.raises(IntegrityError, match="gone|exited|answer"):
            domain.evaluate(spec, env, domain.oracle(spec, task, toolbox), toolbox, ctx)


def test_a_judge_s_collector_sandbox_lost_before_judging_is_replaced(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The collectors started for the judge during the agent's turn may die; the judge then
    runs those accounts' collectors in fresh sandboxes and misses no evidence."""
    spec = catalog.scenarios["ciso/cloud-s3-versioning"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        warm = env.runtime.warm  # type: ignore[union-attr]
        assert len(warm) == 6 and all(c.alive() for c in warm.values())
        for collector in list(warm.values())[:2]:
            assert collector._proc is not None
            os.killpg(collector._proc.pid, signal.SIGKILL)
            collector._proc.wait(timeout=10)
        result = domain.evaluate(spec, env, domain.oracle(spec, task, toolbox), toolbox, ctx)
    assert result.passed, result.details
    assert result.metrics["evidence_collected"] == 1.0


def test_hidden_accounts_are_made_in_the_standby_endpoint(tmp_path: Path) -> None:
    """The judge's endpoint holds the hidden accounts before it binds; a seeding that fails
    shows its error when the endpoint is activated."""
    _, hidden = cloud.variants("cloud-s3-versioning", 11, 1, 1)
    account = "210987654321"
    spare = MotoServer(
        free_port(),
        tmp_path,
        name="spare",
        preload=cloud.SERVICES,
        standby=True,
        seed=(
            "itbench_ciso.checks.cloud:seed_accounts",
            [{"account": account, "plan": hidden[0].data, "suffix": "00000042"}],
        ),
    )
    spare.launch()
    try:
        assert not port_open(spare.port)
        spare.activate()
        # The payload is not left open to anyone who can read the server's descriptors.
        assert spare.process.proc is not None
        assert os.readlink(f"/proc/{spare.process.proc.pid}/fd/0") == "/dev/null"
        assert spare.identity_problems() == []
        s3 = spare.client("s3", spare.account(account))
        names = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
        assert names == sorted(f"{b['name']}-00000042" for b in hidden[0].data["buckets"])
        # Nothing of it in the default account.
        assert spare.client("s3").list_buckets()["Buckets"] == []
    finally:
        spare.stop()
    broken = MotoServer(
        free_port(),
        tmp_path,
        name="broken",
        standby=True,
        seed=("itbench_ciso.checks.cloud:seed_accounts", [{"account": account}]),
    )
    broken.launch()
    try:
        with pytest.raises(InfrastructureError, match="KeyError"):
            broken.activate(timeout=60)
    finally:
        broken.stop()


# --- secrets, fingerprints ---------------------------------------------------------------------


def _ctx(tmp: Path, secret: bytes, seed: int = 7) -> TrialContext:
    ctx = TrialContext("t", seed, tmp / "trial", tmp / "ws", free_port(), 2, secret=secret)
    ctx.trial_dir.mkdir(parents=True)
    ctx.workspace.mkdir(parents=True)
    return ctx


@pytest.mark.parametrize(
    "sid",
    ["ciso/k8s-privileged", "ciso/linux-umask", "ciso/update-privileged-privileged-except-system"],
)
def test_hidden_variants_come_from_the_secret(
    sid: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Same public facts (scenario, seed), different secrets: different hidden variants; the
    visible system does not determine them."""
    spec = catalog.scenarios[sid]
    assert isinstance(spec, CisoSpec)
    prints = []
    for i, secret in enumerate([b"one", b"two", b"one"]):
        env = domain.create_environment(spec, _ctx(tmp_path / str(i), secret))
        try:
            env.setup()
            prints.append(env.fingerprint())
        finally:
            env.teardown()
    assert prints[0] == prints[2]
    assert prints[0]["hidden_variants"] != prints[1]["hidden_variants"]


def test_fingerprint_names_the_policy_set(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/update-host-network-host-namespaces"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path) as (env, _):
        first = env.fingerprint()
        runtime = env.runtime
        assert runtime is not None
        runtime._original["control-01.rego"] += "\n# changed\n"  # type: ignore[attr-defined]
        second = env.fingerprint()
        runtime.hidden[0].violating.add("Pod/x/y")
        third = env.fingerprint()
    assert set(first) == {"hidden_variants", "original_policy_set"}
    assert first["original_policy_set"] != second["original_policy_set"]
    assert second["hidden_variants"] != third["hidden_variants"]


# --- leaks in what the agent sees ---------------------------------------------------------------


def _forbidden(spec: CisoSpec) -> list[str]:
    """Strings naming the scenario beyond what its goal says."""
    words = [spec.id, spec.id.split("/", 1)[1], spec.check, spec.title]
    words += [spec.changed or "", *[str(v) for v in spec.params.values()]]
    goal = spec.goal.lower()
    # A one-word parameter (``umask``) is ordinary vocabulary of the systems themselves.
    return sorted({w for w in words if ("-" in w or " " in w) and w.lower() not in goal})


def _workspace_text(root: Path) -> str:
    parts = []
    for p in sorted(root.rglob("*")):
        parts.append(str(p.relative_to(root)))
        if p.is_file() and not p.is_symlink():
            parts.append(p.read_text(errors="replace"))
    return "\n".join(parts)


def _visible_text(domain: CisoDomain, spec: CisoSpec, tmp: Path) -> str:
    with live(domain, spec, tmp) as (env, ctx):
        toolbox, task = toolbox_and_task(domain, spec, env, ctx)
        texts = [task.model_dump_json(), _text(env.context()), _workspace_text(ctx.workspace)]
        ref = reference(spec)
        if "kubectl_get" in toolbox.tools:
            texts.append(_text(toolbox.call("kubectl_get")))
        if "read_policies" in toolbox.tools:
            texts.append(_text(toolbox.call("read_policies")))
        if spec.family == "cloud":
            texts.append(_text(toolbox.call("run_collector", script=ref.collector)))
            # moto's own state dump is the harness's alone.
            url = env.context()["endpoint_url"]
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=30)
            assert refused.value.code == 403
        if spec.family == "linux":
            texts.append(_text(toolbox.call("run_playbook", playbook=ref.playbook)))
    return "\n".join(texts)


@pytest.mark.parametrize("family", ["kubernetes", "policy-update", "linux", "cloud"])
def test_nothing_the_agent_sees_names_the_scenario(
    family: str, domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    specs = [
        s for s in catalog.scenarios.values() if isinstance(s, CisoSpec) and s.family == family
    ]
    if family in ("linux", "cloud"):  # the slow families: every third scenario
        specs = specs[::3]
    checked = 0
    for i, spec in enumerate(specs):
        text = _visible_text(domain, spec, tmp_path / str(i)).lower()
        for word in _forbidden(spec):
            assert word.lower() not in text, (spec.id, word)
            checked += 1
        for other in all_checks():  # no check of the library is named either
            assert other not in text, (spec.id, other)
    assert checked > 0


def test_the_opa_server_starts_with_an_empty_environment(marker: None, tmp_path: Path) -> None:
    """The OPA backend's server process gets no variable of the harness (a stand-in binary that
    records its environment and listens as `opa run --server` would)."""
    import stat
    import sys

    from itbench_ciso.engine import OpaServer

    seen = tmp_path / "environment.json"
    fake = tmp_path / "opa"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import http.server, json, os, sys\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "host, port = sys.argv[sys.argv.index('--addr') + 1].rsplit(':', 1)\n"
        "http.server.HTTPServer((host, int(port)), http.server.BaseHTTPRequestHandler)"
        ".serve_forever()\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    server = OpaServer(str(fake), free_port(), tmp_path)
    server.start()
    try:
        assert server.alive()
        environment = json.loads(seen.read_text())
    finally:
        server.stop()
    assert not server.alive()
    assert set(environment) <= ENGINE_ENV, environment
    _assert_no_marker(json.dumps(environment))


@needs_sandbox
def test_evidence_left_as_a_link_to_a_harness_file_is_refused(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A playbook owns its run directory: a link it leaves there is never followed by the
    harness, so it cannot read a harness file back through its evidence."""
    secret = tmp_path / "harness.json"
    secret.write_text(json.dumps({"secret": MARKER_VALUE}))
    playbook = f"""---
- hosts: all
  gather_facts: false
  tasks:
    - name: Point the evidence at a file of the harness
      ansible.builtin.file:
        src: "{secret}"
        dest: "{{{{ evidence_file }}}}"
        state: link
        force: true
"""
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    with live(domain, spec, tmp_path / "trial-env") as (env, ctx):
        toolbox, _ = toolbox_and_task(domain, spec, env, ctx)
        ran = toolbox.call("run_playbook", playbook=playbook)
    assert ran["status"] == "successful", ran
    assert ran["evidence"] == {}
    assert all("refused" in p for p in ran["problems"].values()), ran["problems"]
    _assert_no_marker(_text(ran))
