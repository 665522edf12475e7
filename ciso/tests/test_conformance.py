"""The judge's conformance suite on every engine the domain offers, and engine failures.

The default engine gives OPA's documented result on every case but the ones listed in
:data:`KNOWN_DIFFERENCES`; the README lists the same differences.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from itbench_ciso import engine as engines
from itbench_ciso.conformance import CASES, ERROR, Case, failures, passes
from itbench_ciso.engine import (
    DEFAULT_ENGINE,
    ENGINE_FAILURE,
    POLICY_FAULT,
    OpaEngine,
    WorkerEngine,
    opa_available,
)

from itbench.errors import InfrastructureError

#: Cases on which an engine does not give OPA's result (kept in step with the README).
KNOWN_DIFFERENCES: dict[str, set[str]] = {
    "regorus": {"sprintf width", "number beyond 64-bit floats"},
    "regopy": {
        "sprintf %v of a regex.split part",
        "sprintf %q",
        "sprintf %v array",
        "sprintf %v object",
        "sprintf width",
        "escaped newline counts once",
        "escaped quotes",
        "escaped backslash",
        "unicode escape",
        "raw string keeps backslashes",
        "split on input newlines",
        "string equality with quotes",
        "some k, v in inside an array comprehension",
        "some i, v in over an array inside a comprehension",
        "every true",
        "every false is undefined",
        "every on empty is true",
        "every key and value",
        "in array",
        "in set",
        "in object checks values",
        "some in with index",
        "regex.is_valid",
        "time.parse_rfc3339_ns",
        "call of an unknown function",
        "to_number of a padded string",
        "json.is_valid of a number",
        "yaml.is_valid of a number",
        "yaml.unmarshal of two documents",
        "glob.match **/ needs its delimiter",
        "strings.replace_n in one pass",
        "strings.replace_n with an empty key",
        "strings.split_n",
        "number beyond 64-bit floats",
    },
}


@pytest.fixture(scope="module", params=["regorus", "regopy"])
def worker(request: pytest.FixtureRequest) -> WorkerEngine:
    # regopy runs ``strings.replace_n`` with an empty key until it is stopped.
    engine = WorkerEngine(request.param, timeout=10)
    yield engine
    engine.close()


def test_cases_are_well_formed() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and len(CASES) >= 100
    assert all(isinstance(c, Case) for c in CASES)
    assert sum(c.expected is ERROR for c in CASES) >= 5


def test_the_default_engine_is_regorus() -> None:
    assert DEFAULT_ENGINE == "regorus" == engines.ENGINES[0]


def test_each_engine_differs_from_opa_only_where_known(worker: WorkerEngine) -> None:
    """The default engine differs on the fewest cases; every difference is documented."""
    got = failures(worker)
    assert set(got) == KNOWN_DIFFERENCES[worker.name], got
    assert len(KNOWN_DIFFERENCES[DEFAULT_ENGINE]) < len(KNOWN_DIFFERENCES["regopy"])


def test_the_readme_lists_each_engine_s_differences() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name, cases in KNOWN_DIFFERENCES.items():
        assert f"| {name} | {len(CASES) - len(cases)} of {len(CASES)} |" in readme, name


@pytest.mark.skipif(opa_available() is not None, reason=str(opa_available()))
def test_an_opa_server_gives_every_documented_result() -> None:
    url = os.environ.get("ITBENCH_OPA_URL")
    if not url:
        pytest.skip("ITBENCH_OPA_URL is not set")
    assert failures(OpaEngine(url)) == {}


# --- what failed: the policy or the engine ------------------------------------------------------

CONFLICT = "package p\n\nimport rego.v1\n\nx := 1 if input.a\n\nx := 2 if input.b\n"
UNKNOWN = "package p\n\nimport rego.v1\n\nx := no.such_function(1)\n"
FINE = "package p\n\nimport rego.v1\n\nx := count(input.l)\n"


def test_runtime_errors_of_the_policy_are_the_policy_s(worker: WorkerEngine) -> None:
    [conflict] = worker.evaluate({"p.rego": CONFLICT}, "data.p.x", [{"a": True, "b": True}])
    assert conflict.kind == POLICY_FAULT and conflict.error and conflict.value is None
    [fine] = worker.evaluate({"p.rego": CONFLICT}, "data.p.x", [{"a": True}])
    assert fine.error is None and fine.value == 1


def test_a_policy_that_crashes_the_engine_fails_alone() -> None:
    """rego-cpp's worker dies on a call of an unknown function: an engine failure, which the
    judge attributes to the policy, because a fixed policy still evaluates on the same input
    (an agent must not turn its failure into an error that scores exclude)."""
    engine = WorkerEngine("regopy")
    try:
        [crashed] = engine.evaluate({"p.rego": UNKNOWN}, "data.p.x", [{"l": [1]}])
        assert crashed.kind == ENGINE_FAILURE, crashed
        rows = engine.judge({"p.rego": UNKNOWN}, ["data.p.x"], [{"l": [1]}, {"l": []}])
        assert [r[0].kind for r in rows] == [ENGINE_FAILURE, ENGINE_FAILURE]
        # The next policy gets a working engine.
        [after] = engine.evaluate({"p.rego": FINE}, "data.p.x", [{"l": [1, 2]}])
        assert after.value == 2 and after.error is None
    finally:
        engine.close()


def test_a_broken_engine_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the engine fails on the judge's own fixed policy too, nothing can be judged."""
    monkeypatch.setattr(engines, "WORKER_MEMORY", 16 * 1024 * 1024)
    engine = WorkerEngine("regorus")
    try:
        [broken] = engine.evaluate({"p.rego": FINE}, "data.p.x", [{"l": [1]}])
        assert broken.kind == ENGINE_FAILURE, broken
        with pytest.raises(InfrastructureError, match="cannot evaluate policies"):
            engine.judge({"p.rego": FINE}, ["data.p.x"], [{"l": [1]}])
    finally:
        engine.close()


def test_limits_of_the_judge_are_the_policy_s() -> None:
    """A policy past the time limit or the engine's memory fails alone (not an error)."""
    head = "package p\n\nimport rego.v1\n\n"
    slow = head + (
        "x := count([1 | some a in numbers.range(1, 4000); some b in numbers.range(1, 4000)])\n"
    )
    huge = head + "x := count(numbers.range(1, 900000000))\n"
    engine = WorkerEngine(DEFAULT_ENGINE, timeout=2)
    try:
        [late] = engine.judge_query({"p.rego": slow}, "data.p.x", [{}])
        [greedy] = engine.judge_query({"p.rego": huge}, "data.p.x", [{}])
    finally:
        engine.close()
    assert late.kind == POLICY_FAULT and "longer than 2s" in str(late.error), late
    assert greedy.kind == POLICY_FAULT and "memory limit" in str(greedy.error), greedy


def test_passes_reports_what_an_engine_gave(worker: WorkerEngine) -> None:
    ok, got = passes(worker, Case("t", 'x := lower("AB")', "ab"))
    assert ok and got == "ab"
    ok, got = passes(worker, Case("t", 'x := lower("AB")', "AB"))
    assert not ok and got == "ab"


WALKS = """package p

import rego.v1

s := "[p, v] := walk(input)" # [q, w] := walk(input)

x contains p if {
	[p, v] := walk(
		input)
	v == 1
}

y := to_number("ten")
"""


def test_walk_on_the_right_of_an_assignment_is_read_as_the_relation() -> None:
    """Only the expression is rewritten: strings and comments stay, and so do line numbers."""
    engine = WorkerEngine("regorus")
    try:
        modules = {"p.rego": WALKS}
        [[s, x, y]] = engine.evaluate_queries(
            modules, ["data.p.s", "data.p.x", "data.p.y"], [{"a": 1, "b": {"c": 1}}]
        )
    finally:
        engine.close()
    assert s.value == "[p, v] := walk(input)"
    assert sorted(x.value) == [["a"], ["b", "c"]]
    assert y.kind == POLICY_FAULT and y.error and "p.rego:13:" in y.error, y.error
