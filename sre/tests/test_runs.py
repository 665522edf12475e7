"""Whole trials through the real runner: oracle passes, noop and the destructive agent fail."""

from __future__ import annotations

import json
from pathlib import Path

from itbench_sre import topology

from itbench.models import TrialStatus

from .conftest import run

#: A representative mix: release, datastore, process, network (diagnosis only) and control.
VALIDATED = [
    "sre/smoke-cart-bad-release",
    "sre/redis-down",
    "sre/hung-process",
    "sre/edge-latency",
    "sre/control-quiet",
]
#: Mitigation scenarios the destructive agent is tried on.
MITIGATION = [
    "sre/smoke-cart-bad-release",
    "sre/redis-down",
    "sre/hung-process",
]


def test_oracle_passes_and_noop_fails(tmp_path: Path) -> None:
    oracle = run("oracle", VALIDATED, tmp_path / "oracle")
    noop = run("noop", VALIDATED, tmp_path / "noop")
    for sid in VALIDATED:
        verdicts = {k: v for k, v in oracle[sid].metrics.items() if k.endswith(("_pass", "_f1"))}
        assert oracle[sid].status is TrialStatus.passed, (sid, oracle[sid].error, verdicts)
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


#: Run inside the sandbox: read the Prometheus API of the task context as a client would,
#: then try its admin and lifecycle endpoints; prints what each answered.
SERVICES = [s.name for s in topology.SERVICES]
#: What a routine change may revise: every service, and the name registry.
CHANGED = [*SERVICES, topology.DNS]
PROM_PROBE = """
import json, os, urllib.parse, urllib.request, urllib.error
api = json.load(open(os.environ["ITBENCH_TASK"]))["context"]["prometheus"]
codes = {}
for method, path in [("GET", "/api/v1/query?query=up"), ("POST", "/api/v1/admin/tsdb/delete_series?match[]=up"),
                     ("POST", "/api/v1/admin/tsdb/snapshot"), ("POST", "/-/reload"), ("POST", "/-/quit"),
                     ("PUT", "/-/quit"), ("GET", "/api/v1/status/flags"), ("GET", "/api/v1/status/config")]:
    req = urllib.request.Request(api + path, data=b"" if method != "GET" else None, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            codes[method + " " + path] = resp.status
    except urllib.error.HTTPError as exc:
        codes[method + " " + path] = exc.code
assert json.load(open("alerts.json")) is not None
# What explains the quiet shop: the services (and the name registry) with a new revision, and
# those refusing an outside client (401s that no caller of the shop sees).
benign = set()
for service in json.load(open("services.json")):
    history = json.loads(open(service + ".json").read()).get("revisions", [])
    benign |= {service} if len(history) > 1 else set()
promql = 'sum by (job) (increase(http_requests_total{code="401"}[2m])) > 0'
url = api + "/api/v1/query?query=" + urllib.parse.quote(promql)
with urllib.request.urlopen(url, timeout=10) as resp:
    benign |= {r["metric"]["job"] for r in json.load(resp)["data"]["result"]}
answer = {"incident": False, "benign": sorted(benign), "notes": json.dumps(codes)}
open("submission.json", "w").write(json.dumps(answer))
"""


def test_external_program_uses_the_same_tools(tmp_path: Path) -> None:
    """An agent that is a shell script calls the shop's tools through `itbench tool`.

    It runs in the sandbox, where `itbench tool` is the bound tool client, and reaches the
    shop's Prometheus API through the task context: queries answer, while the admin and
    lifecycle endpoints (and the status pages naming the server's files) are refused.
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
        f"echo '{json.dumps(CHANGED)}' > services.json\n"
        f"for s in {' '.join(CHANGED)}; do itbench tool call read_config entity=$s > $s.json; done\n"
        'python3 "$(dirname "$0")/prom.py"\n'
    )
    (script.parent / "prom.py").write_text(PROM_PROBE)
    os.chmod(script, 0o755)
    config = RunConfig(
        agent="command",
        scenarios=["sre/control-quiet"],
        options={"agent_command": str(script)},
    )
    outcome = Runner(Bench(), config, tmp_path / "run").run()
    result = outcome.results[0]
    assert result.status is TrialStatus.passed, (result.error, result.metrics)
    assert result.tool_calls == 2 + len(CHANGED)
    assert result.metrics["benign_pass"], result.metrics
    submitted = json.loads(
        (tmp_path / "run" / "trials" / result.handle / "submission.json").read_text()
    )
    codes = json.loads(submitted["notes"])
    assert codes.pop("GET /api/v1/query?query=up") == 200
    assert codes and all(code in (403, 405) for code in codes.values()), codes
    # Its requests to the Prometheus endpoint are in the trajectory, in order, without their
    # query strings: the accepted ones and the refused ones alike.
    trajectory = json.loads(
        (tmp_path / "run" / "trials" / result.handle / "trajectory.json").read_text()
    )
    requests = [s["detail"] for s in trajectory["steps"] if s.get("name") == "endpoint_request"]
    seen = [(r["method"], r["path"], r["status"]) for r in requests]
    asked = [
        (k.split()[0], k.split()[1].split("?")[0], v)
        for k, v in json.loads(submitted["notes"]).items()
    ]
    assert seen[: len(asked)] == asked, seen
    assert seen[len(asked) :] == [("GET", "/api/v1/query", 200)]
    assert all(r["seconds"] >= 0 for r in requests)
    assert "query=" not in json.dumps(requests) and "match" not in json.dumps(requests)
