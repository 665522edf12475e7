"""Per-trial draws: settings and candidate forms make each trial a new concrete problem."""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from itbench_finops.conventions import RULE, table
from itbench_finops.domain import FinOpsDomain
from itbench_finops.draw import concrete
from itbench_finops.families import FAMILIES
from itbench_finops.handbook import pages
from itbench_finops.optimum import rightsizing_target
from itbench_finops.placeholders import PLACEHOLDER, settle
from itbench_finops.prices import load_prices
from itbench_finops.spec import Candidate, Database, FinOpsSpec, Instance, Truth
from itbench_finops.timeline import start_date

from itbench import testing
from itbench.catalog import Catalog, ScenarioLoader

SPEC = """
domain: finops
family: idle
goal: g
task_types: [detection]
settings:
  days: [7, 14]
  hold: [{key: legal, text: "legal holds"}, {key: keep-me, text: "pinned"}]
documents:
  - key: p.md
    text: "Older than ${days} days. Tag `${hold.key}` means ${hold.text}.\\n${list:kept}\\n${notes:gone}"
resources:
  - {kind: instance, name: web, instance_type: m5.large}
candidates:
  - resource: {kind: volume, name: v1, size: 10}
    forms:
      gone: {role: waste, set: {created_days_ago: 90}, note: "- {name} went on {date}"}
      kept: {set: {created_days_ago: 90, tags: {"${hold.key}": "yes"}}}
  - resource: {kind: volume, name: v2, size: 20}
    forms:
      gone: {role: waste, set: {created_days_ago: 60}, note: "- {name} went on {date}"}
      kept: {set: {created_days_ago: 2}}
truth: {}
"""


def _load(tmp_path: Path, text: str) -> FinOpsSpec:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    (spec,) = ScenarioLoader({"finops": FinOpsDomain()}).load_file(path)
    assert isinstance(spec, FinOpsSpec), spec.line()  # type: ignore[union-attr]
    return spec


def test_forms_settings_and_documents_of_a_chosen_draw(tmp_path: Path) -> None:
    spec = _load(tmp_path, SPEC)
    assert [c.name for c in spec.candidates] == ["v1", "v2"]
    got = concrete(
        spec, {"v1": "kept", "v2": "gone"}, {"days": 14, "hold": spec.settings["hold"][1]}
    )
    assert got.truth.waste == ["v2"]
    v1 = got.resource("v1")
    assert v1.tags == {"keep-me": "yes"}
    text = got.documents[0].text
    assert text.startswith("Older than 14 days. Tag `keep-me` means pinned.")
    assert "- v1" in text and "- v2 went on ${date:v2}" in text
    assert not got.candidates and not got.settings
    with pytest.raises(ValueError, match="has no form 'lost'"):
        concrete(spec, {"v1": "lost"})
    with pytest.raises(ValueError, match="no setting 'weeks'"):
        concrete(spec, settings={"weeks": 2})


def test_draws_follow_the_secret_and_vary_between_trials(tmp_path: Path) -> None:
    spec = _load(tmp_path, SPEC)
    domain = FinOpsDomain()

    def drawn(secret: bytes, seed: int) -> dict[str, object]:
        with testing.trial_context(tmp_path / secret.hex()[:8], secret=secret, seed=seed) as ctx:
            concrete_spec, record = domain.draw(spec, ctx)
        assert concrete_spec.truth.waste == record["waste"]
        assert record["waste"], record  # an incident draws at least one waste item
        return record

    first = drawn(b"a" * 32, 1)
    assert drawn(b"a" * 32, 1) == first  # reproducible from the run's secret
    seen = {repr(drawn(bytes([k]) * 32, k)) for k in range(12)}
    assert len(seen) > 3  # and not predictable without it


def test_bad_draw_declarations_name_field_and_reason(tmp_path: Path) -> None:
    cases = {
        SPEC.replace("days: [7, 14]", "days: []"): "settings must map each placeholder",
        SPEC.replace("set: {created_days_ago: 90}, note", "set: {size: -1}, note"): (
            "candidates.0 (v1) form 'gone': volume.size"
        ),
        SPEC.replace(
            "truth: {}", "truth: {}\nwaste_drawn: [1, 5]"
        ): "waste_drawn [1, 5] must satisfy",
        SPEC.replace("Older than ${days}", "Older than ${weeks}"): (
            "placeholders without a setting: ${weeks}"
        ),
    }
    loader = ScenarioLoader({"finops": FinOpsDomain()})
    path = tmp_path / "bad.yaml"
    for text, phrase in cases.items():
        path.write_text(text)
        (err,) = loader.load_file(path)
        assert not isinstance(err, FinOpsSpec), phrase
        assert "bad.yaml" in err.line() and phrase in err.line(), (phrase, err.line())
    # A setting alternative that makes the spec invalid is named with its value.
    path.write_text(
        SPEC.replace("days: [7, 14]", "days: [7, 14]\n  size: [10, -4]").replace(
            "{kind: volume, name: v2, size: 20}", '{kind: volume, name: v2, size: "${size}"}'
        )
    )
    (err,) = loader.load_file(path)
    assert "settings.size = -4" in err.line(), err.line()  # type: ignore[union-attr]


def test_every_catalog_draw_is_a_valid_problem(catalog: Catalog) -> None:
    """Each candidate's every form builds, and a scenario's draw always has work or is a control."""
    for sid, spec in catalog.scenarios.items():
        assert isinstance(spec, FinOpsSpec)
        for c in spec.candidates:
            for form in c.forms:
                c.build(form)
        with_waste = [c for c in spec.candidates if c.waste_forms()]
        if spec.truth.incident and "waste" in FAMILIES[spec.family].required:
            low = spec.waste_drawn[0] if spec.waste_drawn else 1
            assert with_waste and low >= 1, sid
        if not spec.truth.incident:
            assert not spec.waste_drawn or spec.waste_drawn == (0, 0), sid


def test_rightsizing_forms_mean_what_they_say(catalog: Catalog) -> None:
    """Under every target, a waste form is over-provisioned and a busy look-alike is not."""
    prices = load_prices()
    for sid, spec in catalog.scenarios.items():
        assert isinstance(spec, FinOpsSpec)
        if spec.family != "rightsizing":
            continue
        for cpu in spec.settings["target_cpu"]:
            for memory in spec.settings["target_memory"]:
                first = {k: v[0] for k, v in spec.settings.items()}
                data = settle(
                    spec._template or {}, {**first, "target_cpu": cpu, "target_memory": memory}
                )
                truth = Truth(target_cpu=cpu, target_memory=memory)
                for raw in data["candidates"]:
                    c = Candidate.model_validate(raw)
                    for name, form in c.forms.items():
                        r = c.build(name)
                        assert isinstance(r, Instance | Database)
                        table = "ec2" if isinstance(r, Instance) else "rds"
                        now = r.instance_type if isinstance(r, Instance) else r.instance_class
                        best, _, _ = rightsizing_target(prices, r, truth)
                        cheaper = prices.raw[table][best][0] < prices.raw[table][now][0]
                        if form.role == "waste":
                            assert cheaper, (sid, c.name, name, cpu, memory)
                        if name in ("busy", "memory_bound", "spiky"):
                            assert not cheaper, (sid, c.name, name, cpu, memory)


def test_the_catalog_holds_thirty_distinct_problems(catalog: Catalog) -> None:
    """Problems, not copies: no matrix variants, every family, 30 or more with a fault."""
    specs = [s for s in catalog.scenarios.values() if isinstance(s, FinOpsSpec)]
    assert not [s.id for s in specs if s.params]
    problems = [s for s in specs if s.truth.incident]
    assert len(problems) >= 30, len(problems)
    assert {s.family for s in problems} == set(FAMILIES)
    assert all(s.candidates or s.settings for s in problems)


def test_every_rule_has_three_wordings_that_state_the_same_values() -> None:
    """Each rule is worded at least three ways, each stating every value; every rule is used."""
    wordings = table()["wordings"]
    used = {r for page in pages().values() for r in RULE.findall(page)}
    assert used == set(wordings)
    for rule, phrasings in wordings.items():
        assert len(set(phrasings)) >= 3, rule
        stated = [set(PLACEHOLDER.findall(p)) for p in phrasings]
        assert all(s == stated[0] for s in stated), (rule, stated)
    for name, options in table()["values"].items():
        assert len({repr(o) for o in options}) >= 2, name


def test_served_conventions_vary_and_the_truth_follows_them(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Wordings, tag keys and the precedence change between trials; roles follow the draw."""
    domain = FinOpsDomain()
    spec = catalog.scenarios["finops/rightsizing-ec2"]
    texts, keys, winners = set(), set(), set()
    for k in range(16):
        with testing.trial_context(tmp_path / str(k), secret=bytes([k]) * 32) as ctx:
            got, record = domain.draw(spec, ctx)  # type: ignore[arg-type]
        assert isinstance(got, FinOpsSpec)
        (sizing,) = [d.text for d in got.documents if d.key == "finops/sizing.md"]
        assert "${" not in sizing
        texts.add(sizing)
        keys.add(record["settings"]["exempt_tag"])
        winner = record["settings"]["decom_precedence"]
        winners.add(winner["role"])
        assert winner["text"] in sizing
        if record["forms"]["billing-api"] == "retiring_exempt":
            assert ("billing-api" in got.truth.waste) == (winner["role"] == "waste")
    assert len(texts) >= 10 and len(keys) >= 3 and winners == {"waste", "keep"}


def test_a_rule_without_wordings_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SPEC.replace("Older than ${days} days.", "${rule:no_such_rule}"))
    (err,) = ScenarioLoader({"finops": FinOpsDomain()}).load_file(path)
    assert not isinstance(err, FinOpsSpec)
    assert "bad.yaml" in err.line() and "${rule:no_such_rule}" in err.line(), err.line()


#: Problems whose answer (the anomaly, a control's evidence, a commitment's exclusions) once
#: stayed the same on every draw; each is now drawn among several candidates.
DRAWN_ANSWERS = (
    "finops/anomaly-type-change",
    "finops/anomaly-control",
    "finops/forecast-data",
    "finops/commitment-savings-plan",
    "finops/budget-control",
    "finops/idle-control",
)


def _answer(spec: FinOpsSpec) -> str:
    """What decides a trial's pass: the truth, and the day an anomaly's cost change began."""
    started = None
    if spec.truth.incident and spec.family in ("anomaly", "forecast"):
        # Days back from the period's end (timeline placement, a fixed day for all draws).
        started = start_date(spec, date(2026, 1, 31), spec.truth.resource or "").isoformat()
    return repr((spec.truth.model_dump(mode="json"), started))


@pytest.mark.parametrize("sid", DRAWN_ANSWERS)
def test_the_answer_itself_is_drawn(catalog: Catalog, tmp_path: Path, sid: str) -> None:
    """Over many trials the right answer takes several values and none dominates.

    Someone who draws the published scenario under a secret of their own (the answer key)
    then holds the answer of another problem, not the trial's.
    """
    domain = FinOpsDomain()
    answers: Counter[str] = Counter()
    for k in range(24):
        with testing.trial_context(tmp_path / str(k), secret=b"answers", seed=k) as ctx:
            got, _ = domain.draw(catalog.scenarios[sid], ctx)  # type: ignore[arg-type]
        assert isinstance(got, FinOpsSpec)
        answers[_answer(got)] += 1
    assert len(answers) >= 4, answers
    assert answers.most_common(1)[0][1] <= 24 * 0.45, answers
