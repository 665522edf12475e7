"""The worker Rego engines (regorus, regopy): Rego v1, sprintf, errors; and the OPA backend."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest
from itbench_ciso.checks import all_checks, k8s, linux
from itbench_ciso.engine import (
    OpaEngine,
    OpaServer,
    PolicyEngine,
    WorkerEngine,
    opa_available,
    opa_binary,
    sets_as_lists,
)

V1 = """package compliance

import rego.v1

violations contains msg if {
	some item in input.items
	item.level > 2
	msg := sprintf("%s is %d items", [item.name, item.level])
}

allowed if count(violations) == 0
"""


def test_rego_v1_syntax_evaluates() -> None:
    engine = WorkerEngine()
    assert engine.compile({"p.rego": V1}) is None
    docs = [{"items": [{"name": "x", "level": 3}, {"name": "y", "level": 1}]}, {"items": []}]
    first, second = engine.evaluate({"p.rego": V1}, "data.compliance.violations", docs)
    assert first.value == ["x is 3 items"] and first.error is None
    assert second.value == []
    allowed = engine.evaluate({"p.rego": V1}, "data.compliance.allowed", docs)
    assert [a.value for a in allowed] == [None, True]


def test_sprintf_keeps_spaces_and_formats_numbers() -> None:
    source = (
        "package f\nimport rego.v1\n"
        's := sprintf("%s is %d items", ["x", 3])\n'
        't := sprintf("%v|%s|%.2f", [{"a": 1}, "two words", 2.5])\n'
    )
    engine = WorkerEngine()
    [s] = engine.evaluate({"f.rego": source}, "data.f.s", [{}])
    [t] = engine.evaluate({"f.rego": source}, "data.f.t", [{}])
    assert s.value == "x is 3 items"
    assert t.value == '{"a": 1}|two words|2.50'


def test_syntax_error_is_reported_with_its_location() -> None:
    bad = "package compliance\nimport rego.v1\n\nviolations contains x if {\n\tx := [\n}\n"
    for name in ("regorus", "regopy"):
        message = WorkerEngine(name).compile({"policy.rego": bad})
        assert message is not None and "policy.rego:" in message, (name, message)


def test_undefined_and_multiline_strings() -> None:
    source = "package u\nimport rego.v1\nlines := regex.split(`\\r?\\n`, input.text)\nmissing := input.nothing\n"
    engine = WorkerEngine()
    [lines] = engine.evaluate({"u.rego": source}, "data.u.lines", [{"text": "a\nb"}])
    [missing] = engine.evaluate({"u.rego": source}, "data.u.missing", [{}])
    assert lines.value == ["a", "b"]
    assert missing.value is None and missing.error is None


@pytest.fixture(scope="module")
def opa_engine() -> PolicyEngine:
    reason = opa_available()
    if reason is not None:
        pytest.skip(reason)
    url = os.environ.get("ITBENCH_OPA_URL")
    if url:
        yield OpaEngine(url)
        return
    binary = opa_binary()
    assert binary is not None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory() as tmp:
        server = OpaServer(binary, port, Path(tmp))
        server.start()
        try:
            yield OpaEngine(server.url)
        finally:
            server.stop()


def test_opa_and_the_default_engine_agree_on_every_reference_policy(
    opa_engine: PolicyEngine,
) -> None:
    """Both engines agree on the hidden variants of every Kubernetes and Linux check."""
    embedded = WorkerEngine()
    for check in all_checks().values():
        if check.family != "kubernetes":
            continue
        _, hidden = k8s.variants(check.id, 1, 3, 4)
        modules = {"policy.rego": check.policy()}
        docs = [v.data for v in hidden]
        ours = embedded.evaluate(modules, "data.compliance.violations", docs)
        theirs = opa_engine.evaluate(modules, "data.compliance.violations", docs)
        assert [sets_as_lists(v.value) for v in ours] == [sets_as_lists(v.value) for v in theirs]
    for lcheck in linux.CHECKS:
        _, hosts = linux.variants(lcheck.id, 1, 3, 4)
        modules = {"policy.rego": lcheck.policy()}
        docs = [lcheck.evidence_of(h.data) for h in hosts]
        ours = embedded.evaluate(modules, "data.compliance.violations", docs)
        theirs = opa_engine.evaluate(modules, "data.compliance.violations", docs)
        assert [sets_as_lists(v.value) for v in ours] == [sets_as_lists(v.value) for v in theirs]


def test_engine_selection_errors_are_infrastructure_errors(tmp_path: Path) -> None:
    """An unknown engine, or `opa` without a server, is a setup error, not an agent failure."""
    from itbench_ciso.domain import CisoDomain
    from itbench_ciso.environment import CisoEnvironment
    from itbench_ciso.spec import CisoSpec

    from itbench.domain import TrialContext
    from itbench.errors import InfrastructureError

    spec = CisoSpec.model_validate(
        {
            "id": "ciso/t",
            "domain": "ciso",
            "family": "kubernetes",
            "check": "k8s-host-namespaces",
            "task_types": ["policy-generation"],
        }
    )
    assert "process ID" in spec.goal
    choices = [{"policy_engine": "rego-ng"}]
    if opa_available() is not None:
        choices.append({"policy_engine": "opa"})
    for options in choices:
        ctx = TrialContext("t", 1, tmp_path / "t", tmp_path / "w", 20999, 2, options=options)
        env = CisoDomain().create_environment(spec, ctx)
        assert isinstance(env, CisoEnvironment)
        with pytest.raises(InfrastructureError, match="policy_engine"):
            env.setup()
        env.teardown()


def test_spec_errors_name_the_field() -> None:
    from itbench_ciso.spec import CisoSpec
    from pydantic import ValidationError

    base = {"id": "ciso/t", "domain": "ciso", "task_types": ["policy-generation"]}
    with pytest.raises(ValidationError, match="unknown check"):
        CisoSpec.model_validate({**base, "family": "kubernetes", "check": "k8s-nope"})
    with pytest.raises(ValidationError, match="belongs to family"):
        CisoSpec.model_validate({**base, "family": "linux", "check": "k8s-host-namespaces"})
    with pytest.raises(ValidationError, match="changed"):
        CisoSpec.model_validate(
            {
                **base,
                "family": "policy-update",
                "check": "k8s-host-namespaces",
                "policy_set": ["k8s-privileged"],
                "changed": "k8s-host-network",
            }
        )


def test_unreachable_opa_server_is_an_infrastructure_error() -> None:
    from itbench.errors import InfrastructureError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])  # bound, never listening: connections are refused
        with pytest.raises(InfrastructureError, match="not reachable"):
            OpaEngine(f"http://127.0.0.1:{port}")


def test_policy_engine_flag_selects_the_engine_on_the_command_line(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    def evaluate(*flags: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "itbench.cli", "evaluate", "--agent", "oracle"]
        argv += ["-s", "ciso/k8s-host-namespaces", "--json", *flags]
        env = {k: v for k, v in os.environ.items() if k != "ITBENCH_OPA_URL"}
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)

    for name in ("regorus", "regopy"):
        res = evaluate("--policy-engine", name, "--out", name)
        assert res.returncode == 0, res.stderr
        [row] = json.loads(res.stdout)["results"]
        assert row["status"] == "passed"
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["config"]["options"] == {"policy_engine": name}
    res = evaluate("--policy-engine", "rego-ng")
    assert res.returncode == 2 and "not one of regorus, regopy, opa" in res.stderr
    if opa_binary() is None:
        # Asking for OPA where none can be had is the harness's error, not the agent's.
        res = evaluate("--policy-engine", "opa", "--out", "opa")
        assert res.returncode == 1
        assert json.loads(res.stdout)["results"][0]["status"] == "error"
