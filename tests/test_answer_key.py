"""The answer-key probe answers a public draw whose answer differs from the trial's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PICK

from itbench.agents import AgentContext
from itbench.builtin.agents import AnswerKeyProbe
from itbench.domain import TrialContext

PAIR = PICK.replace("[north, south, east, west]", "[north, south]")


def _trial_draw(domain: Any, spec: Any, seed: int, tmp_path: Path) -> dict[str, Any]:
    ctx = TrialContext(
        trial_id=f"t{seed}",
        seed=seed,
        trial_dir=tmp_path,
        workspace=tmp_path,
        port_base=0,
        port_count=0,
        secret=f"a trial's own secret {seed}".encode(),
    )
    return domain.draw(spec, ctx)[1]


@pytest.mark.parametrize("seed", range(12))
def test_the_public_draw_has_another_answer_even_where_decoys_outnumber_it(
    seed: int, tmp_path: Path, plugin_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(plugin_site))
    from itbench_toy.domain import ToyDomain, ToySpec

    # Two answers and eight drawn decoys: counted over every leaf, a public draw with the
    # trial's own key but other decoys often differs most, and a memorizer passes by luck.
    domain = ToyDomain()
    published = ToySpec.model_validate(yaml.safe_load(PAIR))
    mine = _trial_draw(domain, published, seed, tmp_path)
    probe = AnswerKeyProbe(
        AgentContext(domain=domain, published=published, trial_dir=tmp_path, trial_draw=mine)
    )
    task = type("Task", (), {"workspace": tmp_path})()
    public = probe.public_draw(task)  # type: ignore[arg-type]
    assert isinstance(public, ToySpec)
    assert public.ground_truth.key != mine["key"]
