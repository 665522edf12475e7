"""Scenario registry: loads catalog directories, expands matrices, validates and selects."""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from itbench.domain import AnyDomain
from itbench.models import ScenarioSpec

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it

SCENARIO_FILE = "scenario.yaml"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_UNSAFE = re.compile(r"[^a-z0-9]+")


@dataclass
class ScenarioError:
    """A rejected scenario file: which file, which field, why."""

    path: Path
    field: str | None
    reason: str
    scenario_id: str | None = None

    def line(self) -> str:
        """One human line for the error."""
        where = f" [{self.scenario_id}]" if self.scenario_id else ""
        fld = f" field '{self.field}'" if self.field else ""
        return f"{self.path}{where}:{fld} {self.reason}"


@dataclass
class Catalog:
    """Validated scenarios plus the files that were rejected."""

    scenarios: dict[str, ScenarioSpec] = field(default_factory=dict)
    errors: list[ScenarioError] = field(default_factory=list)

    def select(
        self,
        patterns: Sequence[str] = ("*",),
        *,
        tags: Sequence[str] = (),
        domains: Sequence[str] = (),
        complexity: Sequence[str] = (),
    ) -> list[ScenarioSpec]:
        """Scenarios whose id matches any glob and which carry every tag given.

        Args:
            patterns: Id globs (``sre/*``); a pattern with no glob character must match exactly
                or as a prefix followed by ``-`` (all variants of a matrix).
            tags: Every tag must be present.
            domains: Any of these domains.
            complexity: Any of these complexities.
        """
        out = []
        for sid, spec in sorted(self.scenarios.items()):
            if not any(_id_matches(sid, p) for p in patterns or ("*",)):
                continue
            if tags and not set(tags) <= set(spec.tags):
                continue
            if domains and spec.domain not in domains:
                continue
            if complexity and spec.complexity.value not in complexity:
                continue
            out.append(spec)
        return out


def _id_matches(sid: str, pattern: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(sid, pattern)
    return sid == pattern or sid.startswith(pattern + "-")


def scenario_files(root: Path) -> Iterable[Path]:
    """Every scenario file under a catalog directory, in a stable order.

    A directory holding ``scenario.yaml`` is one scenario; its other files are data and are not
    searched. Elsewhere every ``*.yaml``/``*.yml`` file is a scenario file.
    """
    if not root.is_dir():
        return
    stack = [root]
    while stack:
        d = stack.pop()
        entries = sorted(d.iterdir())
        if d != root and (d / SCENARIO_FILE).is_file():
            yield d / SCENARIO_FILE
            continue
        for entry in entries:
            if entry.is_dir():
                if not entry.name.startswith((".", "_")):
                    stack.append(entry)
            elif entry.suffix in (".yaml", ".yml") and not entry.name.startswith((".", "_")):
                yield entry
        stack.sort(reverse=True)


def _default_name(path: Path) -> str:
    return path.parent.name if path.name == SCENARIO_FILE else path.stem


def _variant_suffix(values: Iterable[Any]) -> str:
    parts = [_UNSAFE.sub("-", str(v).lower()).strip("-") for v in values]
    return "-".join(p for p in parts if p)


def _substitute(node: Any, params: dict[str, Any]) -> Any:
    if isinstance(node, str):
        whole = _PLACEHOLDER.fullmatch(node)
        if whole and whole.group(1) in params:
            return params[whole.group(1)]
        return _PLACEHOLDER.sub(
            lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), node
        )
    if isinstance(node, list):
        return [_substitute(v, params) for v in node]
    if isinstance(node, dict):
        return {k: _substitute(v, params) for k, v in node.items()}
    return node


def expand_matrix(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Expand a scenario document's ``matrix`` into ``(document, params)`` variants.

    Raises:
        ValueError: the matrix is not a mapping of lists or a list of mappings.
    """
    matrix = doc.get("matrix")
    base = {k: v for k, v in doc.items() if k != "matrix"}
    if matrix is None:
        return [(base, {})]
    combos: list[dict[str, Any]]
    if isinstance(matrix, dict):
        if not matrix or not all(isinstance(v, list) and v for v in matrix.values()):
            raise ValueError("must map each parameter to a non-empty list of values")
        keys = list(matrix)
        combos = [
            dict(zip(keys, vals, strict=True)) for vals in itertools.product(*matrix.values())
        ]
    elif isinstance(matrix, list) and matrix and all(isinstance(m, dict) and m for m in matrix):
        combos = [dict(m) for m in matrix]
    else:
        raise ValueError("must be a mapping of parameter -> list, or a non-empty list of mappings")
    out = []
    for params in combos:
        variant = _substitute(base, params)
        suffix = _variant_suffix(params.values())
        variant["_suffix"] = suffix
        variant["params"] = {**base.get("params", {}), **params}
        out.append((variant, params))
    return out


def _field_of(err: dict[str, Any]) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    # Discriminated/union locations start with the model name; keep the field path only.
    return ".".join(loc) or "(document)"


class ScenarioLoader:
    """Loads scenario files against the registered domains' specs."""

    def __init__(self, domains: dict[str, AnyDomain]) -> None:
        self.domains = domains

    def load(self, roots: Sequence[Path]) -> Catalog:
        """Load every catalog root; later duplicates of an id are rejected."""
        catalog = Catalog()
        origin: dict[str, Path] = {}
        seen_roots: set[Path] = set()
        for root in roots:
            resolved = root.resolve()
            if resolved in seen_roots:
                continue
            seen_roots.add(resolved)
            if not resolved.is_dir():
                catalog.errors.append(ScenarioError(root, None, "catalog path is not a directory"))
                continue
            for path in scenario_files(resolved):
                for spec_or_err in self.load_file(path):
                    if isinstance(spec_or_err, ScenarioError):
                        catalog.errors.append(spec_or_err)
                        continue
                    spec = spec_or_err
                    if spec.id in catalog.scenarios:
                        catalog.errors.append(
                            ScenarioError(
                                path,
                                "id",
                                f"duplicate id, already defined in {origin[spec.id]}",
                                spec.id,
                            )
                        )
                        continue
                    catalog.scenarios[spec.id] = spec
                    origin[spec.id] = path
        return catalog

    def load_file(self, path: Path) -> list[ScenarioSpec | ScenarioError]:
        """Parse, expand and validate one file."""
        try:
            with path.open("rb") as fh:
                doc = yaml.load(fh, Loader=_Loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            return [ScenarioError(path, None, f"invalid YAML{where}: {problem}")]
        except OSError as exc:
            return [ScenarioError(path, None, f"cannot read: {exc.strerror}")]
        if not isinstance(doc, dict):
            return [ScenarioError(path, None, "must be a YAML mapping of scenario fields")]
        domain_name = doc.get("domain")
        if domain_name is None:
            return [
                ScenarioError(path, "domain", "missing (which domain plugin runs this scenario)")
            ]
        domain = self.domains.get(str(domain_name))
        if domain is None:
            known = ", ".join(sorted(self.domains)) or "none registered"
            return [
                ScenarioError(path, "domain", f"unknown domain {domain_name!r} (known: {known})")
            ]
        try:
            variants = expand_matrix(doc)
        except ValueError as exc:
            return [ScenarioError(path, "matrix", str(exc))]
        out: list[ScenarioSpec | ScenarioError] = []
        for variant, _params in variants:
            suffix = variant.pop("_suffix", "")
            base_id = variant.get("id") or f"{domain_name}/{_default_name(path)}"
            if not isinstance(base_id, str):
                out.append(ScenarioError(path, "id", "must be a string"))
                continue
            variant["id"] = f"{base_id}-{suffix}" if suffix else base_id
            if not variant["id"].startswith(f"{domain_name}/"):
                out.append(
                    ScenarioError(path, "id", f"must start with '{domain_name}/'", variant["id"])
                )
                continue
            try:
                spec = domain.spec_model.model_validate(variant)
            except ValidationError as exc:
                for err in exc.errors():
                    out.append(ScenarioError(path, _field_of(dict(err)), err["msg"], variant["id"]))
                continue
            spec._source_path = path
            out.append(spec)
        return out
