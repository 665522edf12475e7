"""Sections of the FinOps scenario reference, generated from the package's tables and models."""

from __future__ import annotations

import inspect
import typing
from typing import Any

from itbench_finops.families import FAMILIES
from itbench_finops.harm import harm
from itbench_finops.prices import load_prices
from itbench_finops.scoring import (
    ALLOCATION_TOLERANCE,
    OWNER_TAG,
    RESOURCE_TYPES,
    TYPE_ALIASES,
)
from itbench_finops.server import MANAGEMENT_ACCOUNT, REGION
from itbench_finops.spec import PRICED_FIELDS, Resource, Truth
from itbench_finops.state import READ_LIMIT


def sections() -> dict[str, str]:
    """Heading -> Markdown body of every FinOps-specific section of the reference."""
    return {
        "Scenario families": families(),
        "Resource kinds": resource_kinds(),
        "Services": services(),
        "Price table": price_table(),
        "Accounts and constants": constants(),
    }


def _code(values: typing.Iterable[object]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "none"


def _table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", r"\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def _paragraphs(obj: Any) -> list[str]:
    return [" ".join(p.split()) for p in (inspect.getdoc(obj) or "").split("\n\n") if p.strip()]


def families() -> str:
    """What each family's scenarios seed, which truth fields they set and how a trial passes."""
    harm_doc = _paragraphs(harm)[-1]
    out = [
        "`family` selects the incident and its scoring. In every family a trial that causes "
        f"harm fails; harm is: {harm_doc[0].lower()}{harm_doc[1:]} A control scenario (`truth.incident: false`) passes only "
        "with a report of `incident: false` and no harm; it need not set the required truth "
        "fields.",
    ]
    for name, rule in FAMILIES.items():
        items = [
            f"- Seeds: {rule.seeds}",
            f"- Truth: {_code(rule.required)} required; also read: {_code(rule.optional)}.",
            f"- Report (submission fields scored): {_code(rule.report)}.",
            f"- Passes when: {rule.passes}",
        ]
        if rule.fix:
            items.append(f"- One item is fixed when: {rule.fix}.")
        if rule.causes:
            items.append(
                f"- Causes (`truth.cause` and the report's `cause`): {_code(rule.causes)}."
            )
        out += [f"### `{name}`\n\n{rule.incident}\n\n" + "\n".join(items)]
    return "\n\n".join(out)


def _kind(model: type[Any]) -> str:
    (kind,) = typing.get_args(model.model_fields["kind"].annotation)
    return str(kind)


def resource_kinds() -> str:
    """Every ``kind`` of ``resources``: its model, how the billing export names it, its prices."""
    (union, _) = typing.get_args(Resource)
    priced = {model: fields for model, fields in PRICED_FIELDS}
    rows = []
    for model in typing.get_args(union):
        kind = _kind(model)
        rtype = RESOURCE_TYPES.get(kind)
        billed = f"`{rtype}`" if rtype else "not billed itself"
        if rtype and TYPE_ALIASES.get(rtype):
            billed += f" (also accepted: {_code(TYPE_ALIASES[rtype])})"
        fields = "; ".join(f"`{path}` in `{table}`" for path, table in priced.get(model, ()))
        rows.append(
            [f"`{kind}`", f"`{model.__name__}`", _paragraphs(model)[0], billed, fields or "-"]
        )
    return (
        "Each entry of `resources` has a `kind` that selects its fields (see the tables of "
        "the scenario fields). `billed as` is the billing export's `ResourceType`, which an "
        "anomaly report names in `resource_type`; `priced by` lists the fields whose values "
        "must be entries of the price table.\n\n"
        + _table(["kind", "model", "what it is", "billed as", "priced by"], rows)
    )


def services() -> str:
    """The service keys ``truth.service`` takes, with their Cost Explorer names and aliases."""
    prices = load_prices()
    rows = [
        [f"`{key}`", entry["name"], _code(entry["aliases"])]
        for key, entry in prices.raw["services"].items()
    ]
    return (
        "`truth.service` is one of these keys. A report's `service` matches when it is the "
        "Cost Explorer `SERVICE` name or an alias (case, spaces and underscores aside).\n\n"
        + _table(["key", "Cost Explorer name", "aliases"], rows)
    )


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def price_table() -> str:
    """The shipped price table: sized types, flat rates and scalars, as the loader reads them."""
    raw = load_prices().raw
    out = [
        "On-demand list prices the billing export is generated from and savings are scored "
        "with (the agent reads the same table with the `price_list` tool). A type, class or "
        "volume type outside these tables is rejected when the scenario loads."
    ]
    scalars = []
    for key, value in raw.items():
        if key == "services":
            continue
        if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
            rows = [
                [f"`{name}`", _number(hourly), _number(vcpu), _number(mem)]
                for name, (hourly, vcpu, mem) in value.items()
            ]
            out.append(
                f"### `{key}`\n\n" + _table(["name", "USD per hour", "vCPU", "memory GiB"], rows)
            )
        elif isinstance(value, dict):
            rows = [[f"`{name}`", _number(rate)] for name, rate in value.items()]
            out.append(f"### `{key}`\n\n" + _table(["name", "USD"], rows))
        else:
            scalars.append([f"`{key}`", _number(value)])
    out.insert(1, _table(["entry", "value"], scalars))
    return "\n\n".join(out)


def constants() -> str:
    """Accounts, region and the scorer's fixed values a scenario author relies on."""
    default_pass = Truth.model_fields["pass_fraction"].default
    rows = [
        [
            "management account",
            f"`{MANAGEMENT_ACCOUNT}`",
            "Holds every resource without `account`, the budgets and the billing export.",
        ],
        [
            "member accounts",
            "`accounts`",
            "12-digit ids; a resource's `account` names one, `truth.account` one or the "
            "management account.",
        ],
        ["region", f"`{REGION}`", "Every resource and price is in this region."],
        [
            "owner tag",
            f"`{OWNER_TAG}`",
            "The tag that names a resource's owner in the `allocation` family.",
        ],
        [
            "allocation tolerance",
            f"{ALLOCATION_TOLERANCE:g}",
            "Largest relative error of an allocated amount that still counts as right.",
        ],
        [
            "pass fraction",
            f"{default_pass:g}",
            "Default `truth.pass_fraction`: the share of the optimum a trial must reach.",
        ],
        [
            "read limit",
            str(READ_LIMIT),
            "Most resources of one kind per account the scorer reads; a seeded account "
            "beyond it cannot be scored.",
        ],
    ]
    return _table(["what", "value", "meaning"], rows)
