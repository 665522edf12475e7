"""Markdown references of scenario and submission fields, generated from pydantic models."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def _type_of(schema: dict[str, Any]) -> str:
    """A short human spelling of a JSON-schema type."""
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " | ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_type_of(s) for s in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {}))}"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"map of {_type_of(extra)}"
        return "object"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind or "any")


def _limits(schema: dict[str, Any]) -> str:
    words = {
        "minimum": "≥",
        "exclusiveMinimum": ">",
        "maximum": "≤",
        "exclusiveMaximum": "<",
        "minLength": "length ≥",
        "maxLength": "length ≤",
        "minItems": "items ≥",
        "maxItems": "items ≤",
        "pattern": "matches",
    }
    parts = [f"{w} `{schema[k]}`" for k, w in words.items() if k in schema]
    return "; ".join(parts)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        default = "" if "default" not in prop else f"`{json.dumps(prop['default'])}`"
        note = prop.get("description", "")
        limits = _limits(prop)
        if limits:
            note = f"{note} ({limits})" if note else limits
        lines.append(
            f"| `{name}` | {_cell(_type_of(prop))} | {'yes' if name in required else ''} "
            f"| {_cell(default)} | {_cell(note)} |"
        )
    return lines


def model_reference(model: type[BaseModel], title: str) -> str:
    """Markdown tables of a model's fields and of every model and enum it refers to.

    Args:
        model: The pydantic model.
        title: Heading of the model's own table.

    Returns:
        Markdown, headed ``## {title}``, then ``### {Name}`` for each referenced definition.
    """
    schema = model.model_json_schema()
    out = [f"## {title}", ""]
    doc = schema.get("description", "")
    if doc:
        out += [_cell(doc), ""]
    out += [*_table(schema), ""]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        out += [f"### {name}", ""]
        if definition.get("description"):
            out += [_cell(definition["description"]), ""]
        if "enum" in definition:
            out += ["One of: " + ", ".join(f"`{json.dumps(v)}`" for v in definition["enum"]), ""]
        elif "properties" in definition:
            out += [*_table(definition), ""]
        else:
            out += [f"Type: {_type_of(definition)}", ""]
    return "\n".join(out)
