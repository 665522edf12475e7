"""Scenario registry: loads catalog directories, expands matrices, validates and selects."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import itertools
import math
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
#: A matrix parameter in an ``id:`` template: ``{name}`` or ``${name}``.
_ID_PLACEHOLDER = re.compile(r"\$?\{([A-Za-z_][A-Za-z0-9_]*)\}")
_UNSAFE = re.compile(r"[^a-z0-9]+")
#: Top-level ``id:``/``domain:`` lines, read from a file that is not valid YAML.
_TOP_LEVEL = re.compile(r"^(id|domain):[ \t]*['\"]?([^'\"#\s]+)", re.MULTILINE)
#: Bounds of one scenario file, aliases and matrix expanded: far above any real scenario, far
#: below what would take the loader minutes (a few lines of YAML aliases can mean 10**8 values).
MAX_VALUES = 200_000
MAX_DEPTH = 100
MAX_VARIANTS = 1000
#: Problems reported per variant; the rest are counted.
MAX_PROBLEMS = 20


@dataclass
class ScenarioError:
    """A rejected scenario file: which file, which field, why.

    Attributes:
        path: The scenario file.
        field: The offending field (dotted path), ``None`` for the whole file.
        reason: Why it was rejected.
        scenario_id: The variant's id, when the file got that far.
        intended_id: The id the file meant to define: its ``id:`` (a template for a matrix),
            else ``domain/name`` from its file name, else the name alone.
    """

    path: Path
    field: str | None
    reason: str
    scenario_id: str | None = None
    intended_id: str | None = None

    def line(self) -> str:
        """One human line for the error."""
        where = f" [{self.scenario_id}]" if self.scenario_id else ""
        fld = f" field '{self.field}'" if self.field else ""
        return f"{self.path}{where}:{fld} {self.reason}"

    def ids(self) -> list[str]:
        """The ids this rejection stands for (the variant's and the intended one)."""
        return [i for i in (self.scenario_id, self.intended_id) if i]

    def matches(self, pattern: str) -> bool:
        """Whether a selection pattern (as of :meth:`Catalog.select`) names this file."""
        if any(_id_matches(i, pattern) for i in self.ids()):
            return True
        return not any(c in pattern for c in "*?[") and self.concerns(pattern)

    def concerns(self, scenario_id: str) -> bool:
        """Whether ``scenario_id`` is (a variant of) the scenario this file meant to define."""
        if scenario_id in self.ids():
            return True
        intended = self.intended_id
        if not intended:
            return False
        if _ID_PLACEHOLDER.search(intended):
            parts = _ID_PLACEHOLDER.split(intended)[::2]  # the literal text between placeholders
            regex = "[a-z0-9-]+".join(re.escape(p) for p in parts)
            return re.fullmatch(regex, scenario_id) is not None
        return scenario_id.startswith(intended + "-")


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

    def rejected(self, patterns: Sequence[str] = ()) -> list[ScenarioError]:
        """Rejections of files whose intended id matches any pattern (all without a pattern)."""
        if not patterns:
            return list(self.errors)
        return [e for e in self.errors if any(e.matches(p) for p in patterns)]

    def rejections_of(self, scenario_id: str) -> list[ScenarioError]:
        """Why the file meant to define ``scenario_id`` was rejected (empty when it was not)."""
        return [e for e in self.errors if e.concerns(scenario_id)]


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


def _slug(value: Any) -> str:
    return _UNSAFE.sub("-", str(value).lower()).strip("-")


def _variant_suffix(values: Iterable[Any]) -> str:
    return "-".join(p for p in (_slug(v) for v in values) if p)


class IdTemplateError(ValueError):
    """An ``id:`` template names a parameter the matrix does not have."""


def id_template_names(value: Any) -> list[str]:
    """The matrix parameters an ``id:`` template uses (empty when ``value`` is no template)."""
    return _ID_PLACEHOLDER.findall(value) if isinstance(value, str) else []


def _render_id(template: str, params: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            known = ", ".join(params) or "none: the document has no matrix"
            raise IdTemplateError(
                f"template {template!r} names unknown parameter {name!r} "
                f"(matrix parameters: {known})"
            )
        slug = _slug(params[name])
        if not slug:
            raise IdTemplateError(
                f"parameter {name!r} value {params[name]!r} gives an empty id part"
            )
        return slug

    return _ID_PLACEHOLDER.sub(value, template)


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


def _combinations(matrix: Any) -> list[dict[str, Any]]:
    if isinstance(matrix, dict):
        if not matrix or not all(isinstance(v, list) and v for v in matrix.values()):
            raise ValueError("must map each parameter to a non-empty list of values")
        _check_names(matrix)
        count = math.prod(len(v) for v in matrix.values())
        if count > MAX_VARIANTS:
            raise ValueError(f"gives {count} variants; at most {MAX_VARIANTS} are allowed")
        keys = list(matrix)
        return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*matrix.values())]
    if isinstance(matrix, list) and matrix and all(isinstance(m, dict) and m for m in matrix):
        if len(matrix) > MAX_VARIANTS:
            raise ValueError(f"gives {len(matrix)} variants; at most {MAX_VARIANTS} are allowed")
        for m in matrix:
            _check_names(m)
        return [dict(m) for m in matrix]
    raise ValueError("must be a mapping of parameter -> list, or a non-empty list of mappings")


def _check_names(params: dict[Any, Any]) -> None:
    bad = [k for k in params if not isinstance(k, str) or not k]
    if bad:
        raise ValueError(f"parameter names must be non-empty strings, not {bad[0]!r}")


def _measure(doc: Any) -> tuple[int, int]:
    """How many values a parsed document holds, aliases expanded, and how deep it nests.

    Stops counting past :data:`MAX_VALUES` values or :data:`MAX_DEPTH` levels (either answer
    is then just over its bound), so measuring stays cheap.
    """
    count = deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack and count <= MAX_VALUES and deepest <= MAX_DEPTH:
        node, depth = stack.pop()
        count += 1
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]
    return count, deepest


def _size_problem(doc: Any) -> str | None:
    """Why a parsed document is too large or too deep to load (``None`` when it is not)."""
    count, depth = _measure(doc)
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if count > MAX_VALUES:
        return f"too large: more than {MAX_VALUES} values (aliases expanded)"
    return None


def expand_matrix(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """Expand a scenario document's ``matrix`` into ``(document, params, suffix)`` variants.

    A variant's id is the document's ``id:`` with its parameters' values as a suffix
    (``toy/x`` gives ``toy/x-a-1``), unless the ``id:`` is a template naming parameters
    (``toy/x-{k}`` or ``toy/x-${k}``), which then gives exactly that id (``toy/x-a``): the
    suffix is then empty, as it is without a matrix.

    Raises:
        IdTemplateError: the ``id:`` template names a parameter the matrix lacks.
        ValueError: the matrix is not a mapping of lists or a list of mappings.
    """
    matrix = doc.get("matrix")
    base = {k: v for k, v in doc.items() if k != "matrix"}
    template = base.get("id") if id_template_names(base.get("id")) else None
    if matrix is None:
        if template is not None:
            _render_id(template, {})  # raises: a template without a matrix
        return [(base, {}, "")]
    combinations = _combinations(matrix)
    values = _measure(base)[0]
    if values * len(combinations) > MAX_VALUES:
        raise ValueError(
            f"gives {len(combinations)} variants of {values} values each; at most "
            f"{MAX_VALUES} values in all"
        )
    out = []
    for params in combinations:
        variant = _substitute(base, params)
        suffix = ""
        if template is not None:
            variant["id"] = _render_id(template, params)
        else:
            suffix = _variant_suffix(params.values())
        declared = base.get("params", {})
        # Params that are not a mapping are left for the spec to reject, by their field.
        variant["params"] = {**declared, **params} if isinstance(declared, dict) else declared
        out.append((variant, params, suffix))
    return out


def _field_of(err: dict[str, Any]) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    # Discriminated/union locations start with the model name; keep the field path only.
    return ".".join(loc) or "(document)"


def _intended_id(path: Path, doc: Any) -> str:
    """The id a scenario file means to define, from its ``id:``, ``domain:`` and name."""
    if isinstance(doc, dict):
        found = {k: doc.get(k) for k in ("id", "domain")}
    else:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        found = {m.group(1): m.group(2) for m in _TOP_LEVEL.finditer(text)}
    if isinstance(found.get("id"), str) and found["id"]:
        return str(found["id"])
    domain = found.get("domain")
    name = _default_name(path)
    return f"{domain}/{name}" if isinstance(domain, str) and domain else name


def _unknown_task_types(values: Any, vocabulary: Sequence[str]) -> list[str]:
    if not vocabulary or not isinstance(values, list):
        return []
    return [v for v in values if isinstance(v, str) and v not in vocabulary]


class ScenarioLoader:
    """Loads scenario files against the registered domains' specs."""

    def __init__(self, domains: dict[str, AnyDomain]) -> None:
        self.domains = domains

    def load(self, roots: Sequence[Path]) -> Catalog:
        """Load every catalog root; an id defined in two files is rejected in both.

        Neither copy runs: which one would be first depends on the order plugins were
        installed, and a scenario package must not be able to replace another's scenario.
        """
        catalog = Catalog()
        origin: dict[str, Path] = {}
        seen_roots: set[Path] = set()

        def duplicate(path: Path, other: Path, sid: str) -> ScenarioError:
            reason = f"duplicate id, also defined in {other}; neither runs"
            return ScenarioError(path, "id", reason, sid, sid)

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
                    if spec.id in origin:
                        catalog.errors.append(duplicate(path, origin[spec.id], spec.id))
                        # The first copy, still in the catalog only until a second one shows.
                        if catalog.scenarios.pop(spec.id, None) is not None:
                            catalog.errors.append(duplicate(origin[spec.id], path, spec.id))
                        continue
                    catalog.scenarios[spec.id] = spec
                    origin[spec.id] = path
        return catalog

    def load_file(self, path: Path) -> list[ScenarioSpec | ScenarioError]:
        """Parse, expand and validate one file."""
        try:
            with path.open("rb") as fh:
                doc = yaml.load(fh, Loader=_Loader)  # a safe loader
        except RecursionError:  # the pure-Python loader, on a deeply nested document
            intended = _intended_id(path, None)
            return [
                ScenarioError(path, None, f"nested deeper than {MAX_DEPTH} levels", None, intended)
            ]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            intended = _intended_id(path, None)
            return [ScenarioError(path, None, f"invalid YAML{where}: {problem}", None, intended)]
        except OSError as exc:
            return [ScenarioError(path, None, f"cannot read: {exc.strerror}")]
        intended = _intended_id(path, doc)

        def error(fld: str | None, reason: str, sid: str | None = None) -> ScenarioError:
            return ScenarioError(path, fld, reason, sid, intended)

        if not isinstance(doc, dict):
            return [error(None, "must be a YAML mapping of scenario fields")]
        size = _size_problem(doc)
        if size is not None:
            return [error(None, size)]
        domain_name = doc.get("domain")
        if domain_name is None:
            return [error("domain", "missing (which domain plugin runs this scenario)")]
        domain = self.domains.get(str(domain_name))
        if domain is None:
            return [error("domain", self._unknown_domain(str(domain_name)))]
        try:
            variants = expand_matrix(doc)
        except IdTemplateError as exc:
            return [error("id", str(exc))]
        except ValueError as exc:
            return [error("matrix", str(exc))]
        vocabulary = tuple(domain.task_types)
        out: list[ScenarioSpec | ScenarioError] = []
        ids: set[str] = set()
        for variant, params, suffix in variants:
            base_id = variant.get("id") or f"{domain_name}/{_default_name(path)}"
            if not isinstance(base_id, str):
                out.append(error("id", "must be a string"))
                continue
            sid = variant["id"] = f"{base_id}-{suffix}" if suffix else base_id
            if not sid.startswith(f"{domain_name}/"):
                out.append(error("id", f"must start with '{domain_name}/'", sid))
                continue
            if sid in ids:
                out.append(error("id", self._shared_id(doc, params), sid))
                continue
            ids.add(sid)
            problems = []
            unknown = _unknown_task_types(variant.get("task_types"), vocabulary)
            if unknown:
                problems.append(
                    error(
                        "task_types",
                        f"unknown task type(s) {', '.join(map(repr, unknown))} for domain "
                        f"{domain_name!r} (valid: {', '.join(vocabulary)})",
                        sid,
                    )
                )
            try:
                spec = domain.spec_model.model_validate(variant)
            except ValidationError as exc:
                for err in exc.errors():
                    fld = _field_of(dict(err))
                    if not (unknown and fld.split(".")[0] == "task_types"):
                        problems.append(error(fld, err["msg"], sid))
            except Exception as exc:  # a bug of the domain's spec: this file only is rejected
                reason = f"the {domain_name} domain's spec raised {type(exc).__name__}: {exc}"
                problems.append(error(None, reason, sid))
            if problems:
                if len(problems) > MAX_PROBLEMS:
                    more = len(problems) - MAX_PROBLEMS
                    problems[MAX_PROBLEMS:] = [error(None, f"and {more} more problems", sid)]
                out += problems
                continue
            spec._source_path = path
            out.append(spec)
        shared = {
            e.scenario_id: e.reason
            for e in out
            if isinstance(e, ScenarioError) and e.field == "id" and e.scenario_id
        }
        # As across files: no variant of a shared id runs, not even the first.
        return [
            error("id", shared[item.id], item.id)
            if isinstance(item, ScenarioSpec) and item.id in shared
            else item
            for item in out
        ]

    @staticmethod
    def _shared_id(doc: dict[str, Any], params: dict[str, Any]) -> str:
        names = id_template_names(doc.get("id"))
        if not names:
            return "several variants get this id (their values give the same suffix)"
        unused = ", ".join(p for p in params if p not in names)
        hint = f" (unused: {unused})" if unused else " (two values give the same text)"
        return (
            f"template {doc['id']!r} gives this id to several variants; "
            f"name every parameter that varies{hint}"
        )

    def _unknown_domain(self, name: str) -> str:
        if not self.domains:
            return f"unknown domain {name!r} (no domain is registered; is its plugin installed?)"
        close = difflib.get_close_matches(name, list(self.domains), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (
            f"unknown domain {name!r} (registered domains: {', '.join(sorted(self.domains))}){hint}"
        )


def catalog_versions(specs: Iterable[ScenarioSpec]) -> dict[str, str]:
    """Per domain, a short digest of how the catalog defines these scenarios.

    Two runs scored on the same definitions (ground truth, goal, parameters...) of their
    scenarios have the same versions; any change to one of them changes its domain's.
    """
    by_domain: dict[str, list[str]] = {}
    for spec in sorted(specs, key=lambda s: s.id):
        by_domain.setdefault(spec.domain, []).append(f"{spec.id}\n{spec.model_dump_json()}")
    return {
        domain: hashlib.sha256("\n\n".join(parts).encode()).hexdigest()[:16]
        for domain, parts in sorted(by_domain.items())
    }
