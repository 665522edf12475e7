"""The concrete scenario of one trial, drawn from the sets its spec declares.

A scenario declares ``settings`` (alternatives of ``${name}`` placeholders) and
``candidates`` (resources with several forms: waste, or a look-alike that must stay). Every
trial draws one alternative of each setting and one form of each candidate, with a seed
derived from the run's secret, so that repeating a scenario explores it: which resources are
waste, which are decoys, the conventions' values and the texts that state them change from
trial to trial, and nobody can predict them.
"""

from __future__ import annotations

import random
import re
from typing import Any

from itbench import TrialContext
from itbench_finops.placeholders import settle
from itbench_finops.spec import Candidate, FinOpsSpec

#: A document's placeholders for what was drawn: ``${list:FORM}``, ``${notes:FORM}``.
DRAWN = re.compile(r"\$\{(list|notes):([A-Za-z0-9_-]+)\}")


def _waste_range(spec: FinOpsSpec, with_waste: int) -> tuple[int, int]:
    if spec.waste_drawn is not None:
        return spec.waste_drawn
    if not spec.truth.incident or not with_waste:
        return (0, 0)
    return (1, with_waste)


def draw(spec: FinOpsSpec, ctx: TrialContext) -> tuple[FinOpsSpec, dict[str, Any]]:
    """The trial's concrete spec and what was drawn.

    Returns:
        A spec without settings or candidates (the drawn forms are among its resources and
        the truth names the drawn waste), and ``{"settings": ..., "forms": ..., "waste":
        ...}``.
    """
    if not spec.settings and not spec.candidates:
        return spec, {}
    rng = random.Random(ctx.secret_seed("finops-draw"))
    values = {name: rng.choice(options) for name, options in sorted(spec.settings.items())}
    data = settle(spec._template or spec.model_dump(), values)
    candidates = [Candidate.model_validate(c) for c in data.get("candidates", [])]
    forms = pick_forms(candidates, spec, rng)
    concrete = FinOpsSpec.model_validate(apply_forms(data, candidates, forms))
    concrete._source_path = spec.source_path
    waste = [n for n in concrete.truth.waste if n in forms]
    if concrete.truth.resource in forms:
        waste.append(concrete.truth.resource)
    return concrete, {"settings": values, "forms": forms, "waste": waste}


def concrete(
    spec: FinOpsSpec,
    forms: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> FinOpsSpec:
    """``spec`` with chosen forms and settings (a draw made by hand, for tests and replays).

    Args:
        spec: The scenario as the catalog holds it.
        forms: Candidate name -> form; a candidate not named takes its first keep form (its
            first form when it has none).
        settings: Setting -> value; a setting not named takes its first alternative.

    Raises:
        ValueError: a form or setting that the spec does not declare.
    """
    values = {k: v[0] for k, v in spec.settings.items()}
    for name, value in (settings or {}).items():
        if name not in spec.settings:
            raise ValueError(f"no setting {name!r} (settings: {', '.join(spec.settings)})")
        values[name] = value
    data = settle(spec._template or spec.model_dump(), values)
    candidates = [Candidate.model_validate(c) for c in data.get("candidates", [])]
    chosen = {}
    for c in candidates:
        form = (forms or {}).get(c.name) or next(iter(c.keep_forms() or c.forms))
        if form not in c.forms:
            raise ValueError(
                f"candidate {c.name!r} has no form {form!r} (forms: {', '.join(c.forms)})"
            )
        chosen[c.name] = form
    unknown = set(forms or {}) - set(chosen)
    if unknown:
        raise ValueError(f"no candidates named {', '.join(sorted(unknown))}")
    out = FinOpsSpec.model_validate(apply_forms(data, candidates, chosen))
    out._source_path = spec.source_path
    return out


def pick_forms(candidates: list[Candidate], spec: FinOpsSpec, rng: random.Random) -> dict[str, str]:
    """One form per candidate: a waste form for as many as the spec asks, keep forms else."""
    able = [c.name for c in candidates if c.waste_forms()]
    low, high = _waste_range(spec, len(able))
    chosen = set(rng.sample(able, rng.randint(low, high))) if high else set()
    out = {}
    for c in candidates:
        options = c.waste_forms() if c.name in chosen else c.keep_forms()
        out[c.name] = rng.choice(sorted(options))
    return out


def apply_forms(
    data: dict[str, Any], candidates: list[Candidate], forms: dict[str, str]
) -> dict[str, Any]:
    """The scenario document with each candidate in its form: resources, truth, documents.

    A waste form joins the truth's ``waste`` and sets its ``owner``; its ``cause`` and
    ``service`` become the truth's (a root-cause family also takes the resource and its
    account as the truth's, instead of listing it as waste).
    """
    family = data.get("family")
    truth = dict(data.get("truth") or {})
    resources = list(data.get("resources") or [])
    lists: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    for c in candidates:
        name, form_name = c.name, forms[c.name]
        form = c.forms[form_name]
        built = c.build(form_name)
        resources.append(built.model_dump(exclude_unset=True))
        lists.setdefault(form_name, []).append(name)
        if form.note:
            notes.setdefault(form_name, []).append(
                form.note.replace("{name}", name)
                .replace("{date}", f"${{date:{name}}}")
                .replace("{id}", f"${{id:{name}}}")
                .replace("{ip}", f"${{ip:{name}}}")
            )
        for key, value in form.truth.items():
            have = truth.get(key)
            if isinstance(have, list) and isinstance(value, list):
                truth[key] = [*have, *value]
            elif isinstance(have, dict) and isinstance(value, dict):
                truth[key] = {**have, **value}
            else:
                truth[key] = value
        if form.role != "waste":
            continue
        if form.owner:
            truth["owners"] = {**truth.get("owners", {}), name: form.owner}
        if form.cause:
            truth["cause"] = form.cause
        if form.service:
            truth["service"] = form.service
        if family in ("anomaly", "forecast"):
            truth["resource"] = name
            truth["account"] = built.account
        elif family == "autoscaling":
            truth["group"] = name
        elif family != "budget":
            truth["waste"] = [*truth.get("waste", []), name]

    def render(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            what, form_name = m.group(1), m.group(2)
            if what == "list":
                names = lists.get(form_name, [])
                return "\n".join(f"- {n}" for n in names) if names else "- (none)"
            return "\n".join(notes.get(form_name, []))

        return DRAWN.sub(one, text)

    documents = [{**d, "text": render(str(d.get("text", "")))} for d in data.get("documents", [])]
    return {
        **data,
        "resources": resources,
        "truth": truth,
        "documents": documents,
        "candidates": [],
        "waste_drawn": None,
        "settings": {},
    }
