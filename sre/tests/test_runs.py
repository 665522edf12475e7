"""Whole trials through the real runner: oracle passes, noop and the destructive agent fail."""

from __future__ import annotations

from pathlib import Path

from itbench.models import TrialStatus

from .conftest import run

#: A representative mix: release, datastore, process, network (diagnosis only) and control.
VALIDATED = [
    "sre/smoke-cart-bad-release",
    "sre/redis-down-true",
    "sre/hung-process-currency-0",
    "sre/edge-latency-checkout-payment",
    "sre/control-quiet",
]
#: Mitigation scenarios the destructive agent is tried on.
MITIGATION = [
    "sre/smoke-cart-bad-release",
    "sre/redis-down-true",
    "sre/scaled-down-frontend",
]


def test_oracle_passes_and_noop_fails(tmp_path: Path) -> None:
    oracle = run("oracle", VALIDATED, tmp_path / "oracle")
    noop = run("noop", VALIDATED, tmp_path / "noop")
    for sid in VALIDATED:
        assert oracle[sid].status is TrialStatus.passed, (
            sid,
            oracle[sid].error,
            oracle[sid].metrics,
        )
        assert noop[sid].status is TrialStatus.failed, (sid, noop[sid].error)
    smoke = oracle["sre/smoke-cart-bad-release"]
    assert smoke.metrics["mitigated"] and smoke.metrics["regressions"] == 0
    assert smoke.timings.time_to_mitigate is not None and smoke.steps >= 1


def test_destructive_agent_fails_every_mitigation(tmp_path: Path) -> None:
    results = run("sre/destructive", MITIGATION, tmp_path / "destructive")
    for sid in MITIGATION:
        r = results[sid]
        assert r.status is TrialStatus.failed, (sid, r.status, r.error)
        assert r.metrics["mitigation_pass"] is False
        assert r.metrics["regressions"] > 0 or r.metrics["monitoring_intact"] is False
        # The agent did localize correctly in the smoke scenario only by accident; the
        # mitigation check is what fails it everywhere.
        assert r.steps >= 10


def test_external_program_uses_the_same_tools(tmp_path: Path) -> None:
    """An agent that is a shell script calls the shop's tools through `itbench tool`.

    It runs in the sandbox, where `itbench tool` is the bound tool client.
    """
    import os

    from itbench.bench import Bench
    from itbench.models import RunConfig
    from itbench.runner import Runner

    script = tmp_path / "agent" / "agent.sh"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\nset -e\n"
        "itbench tool call processes > procs.json\n"
        "itbench tool call alerts > alerts.json\n"
        "grep -q '\"loadgen\"' procs.json\n"
        "if grep -q alertname alerts.json; then incident=true; else incident=false; fi\n"
        'echo "{\\"incident\\": $incident}" > submission.json\n'
    )
    os.chmod(script, 0o755)
    config = RunConfig(
        agent="command",
        scenarios=["sre/control-quiet"],
        options={"agent_command": str(script)},
    )
    outcome = Runner(Bench(), config, tmp_path / "run").run()
    result = outcome.results[0]
    assert result.status is TrialStatus.passed, (result.error, result.metrics)
    assert result.tool_calls == 2
