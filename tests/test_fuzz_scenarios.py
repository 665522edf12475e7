"""Fuzzed scenario files: every malformed file is rejected with its file, field and reason.

The documents start from real scenario files (the toy domain's and each real domain's catalog)
and are broken at random: fields dropped, given values of any type, unknown fields added, odd
ids and id templates, matrices of any shape, unicode everywhere, huge and deep documents, and
files that are not YAML or not mappings. The loader is the catalog's, with the real domains.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliFn
from fuzzing import any_text, budget, deep_json, json_values, names, scalars
from hypothesis import given
from hypothesis import strategies as st
from pydantic import model_validator

from itbench.bench import Bench
from itbench.catalog import MAX_PROBLEMS, ScenarioError, ScenarioLoader, scenario_files
from itbench.domain import AnyDomain
from itbench.models import MAX_TIME_LIMIT, ScenarioSpec

REPO = Path(__file__).parents[1]
TOY_CATALOG = REPO / "tests" / "plugins" / "itbench-toy" / "itbench_toy" / "scenarios"
REAL_DOMAINS = ("sre", "ciso", "finops")


def _documents(root: Path) -> list[dict[str, Any]]:
    docs = []
    for path in scenario_files(root):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(doc, dict), path
        docs.append(doc)
    return docs


#: Valid scenario documents of every domain, the starting points of the mutations.
SEEDS = {
    "toy": _documents(TOY_CATALOG),
    **{d: _documents(REPO / "scenarios" / d) for d in REAL_DOMAINS},
}


#: The domains by name, once the ``loader`` fixture made them (strategies read their specs).
DOMAINS: dict[str, AnyDomain] = {}


@pytest.fixture(scope="module")
def loader(plugin_site: Path) -> Iterator[ScenarioLoader]:
    """The catalog's loader with the real domains (entry points) and the toy domain."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(plugin_site))
        from itbench_toy.domain import ToyDomain

        DOMAINS.update(Bench(autoload=True).domains, toy=ToyDomain())
        assert set(SEEDS) <= set(DOMAINS)
        yield ScenarioLoader(dict(DOMAINS))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a document (keys of mappings, indexes of lists)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _parent(doc: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = doc
    for step in path[:-1]:
        node = node[step]
    return node


odd_ids = st.one_of(
    any_text,
    scalars,
    st.sampled_from(
        [
            "",
            "/",
            "toy/",
            "/x",
            "toy//x",
            "toy/x/y",
            "TOY/x",
            "toy/-x",
            "toy/x y",
            "toy/ä",
            "toy/x\n",
            "{k}",
            "${k}",
            "toy/{k}",
            "toy/x-{k}-{k}",
            "toy/x-${missing}",
            "toy/x-{",
            "toy/x-}",
            "toy/x-{{k}}",
            "sre/x-{target}",
            "ciso/{check}",
        ]
    ),
    any_text.map(lambda t: f"toy/{t}"),
)

matrices = st.one_of(
    scalars,
    st.dictionaries(names, st.lists(scalars, max_size=3), max_size=3),
    st.lists(st.dictionaries(names, scalars, max_size=3), max_size=3),
    st.dictionaries(st.sampled_from(["k", "key", "target", "check"]), json_values(4), max_size=2),
)


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A real scenario document, broken by one to four random edits."""
    domain = draw(st.sampled_from(sorted(SEEDS)))
    doc: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(SEEDS[domain])))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "set", "unknown", "id", "matrix", "domain", "ref"]))
        paths = _paths(doc)
        if op in ("drop", "set") and paths:
            path = draw(st.sampled_from(paths))
            parent = _parent(doc, path)
            if op == "drop":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(json_values())
        elif op == "unknown":
            mappings = [p for p in paths if isinstance(_parent(doc, (*p, None)), dict)]
            target = _parent(doc, (*draw(st.sampled_from([(), *mappings])), None))
            target[draw(names)] = draw(json_values(4))
        elif op == "id":
            doc["id"] = draw(odd_ids)
        elif op == "matrix":
            doc["matrix"] = draw(matrices)
        elif op == "domain":
            doc["domain"] = draw(st.one_of(st.sampled_from([*SEEDS, "Toy", "toy "]), scalars))
        elif op == "ref":
            # A placeholder in any string: known parameters, unknown ones, broken syntax.
            strings = [p for p in paths if isinstance(_parent(doc, p)[p[-1]], str)]
            if strings:
                path = draw(st.sampled_from(strings))
                ref = draw(st.sampled_from(["${k}", "${target}", "${check}", "${", "$${k}", "${}"]))
                _parent(doc, path)[path[-1]] = draw(st.sampled_from([ref, f"x{ref}y"]))
    return doc


#: libyaml when PyYAML was built with it, as the catalog uses.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(doc: Any, unicode: bool = True) -> str:
    return str(yaml.dump(doc, Dumper=_DUMPER, allow_unicode=unicode, sort_keys=False))


def _top(field: str) -> str:
    return field.split(".", 1)[0]


def check_items(path: Path, doc: Any, items: list[ScenarioSpec | ScenarioError]) -> None:
    """What every loaded file must give: scenarios, or rejections naming file, field, reason."""
    assert items, "every file gives a scenario or a rejection"
    # A field named is one of the document's, or one its domain's spec requires.
    known = (set(doc) if isinstance(doc, dict) else set()) | _model_fields(doc) | {"(document)"}
    for item in items:
        if isinstance(item, ScenarioSpec):
            assert item.source_path == path
            assert item.id.startswith(f"{item.domain}/")
            assert math.isfinite(item.time_limit) and 0 < item.time_limit <= MAX_TIME_LIMIT
            continue
        assert isinstance(item, ScenarioError), item
        assert item.path == path
        assert isinstance(item.reason, str) and item.reason.strip()
        line = item.line()
        assert line.startswith(str(path)) and item.reason in line
        if item.field is not None:
            assert isinstance(item.field, str) and item.field
            assert f"field '{item.field}'" in line
            assert _top(item.field) in known, item


def _model_fields(doc: Any) -> set[str]:
    """The fields the document's domain's spec has (the base spec's for an unknown domain)."""
    domain = doc.get("domain") if isinstance(doc, dict) else None
    model = DOMAINS[domain].spec_model if isinstance(domain, str) and domain in DOMAINS else None
    return set((model or ScenarioSpec).model_fields)


def load(loader: ScenarioLoader, tmp: Path, text: str | bytes) -> tuple[Path, Any, list[Any]]:
    path = tmp / "scenario.yaml"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    try:
        doc = yaml.load(path.read_bytes(), Loader=_LOADER)  # a safe loader
    except (yaml.YAMLError, RecursionError, ValueError):
        doc = None
    return path, doc, loader.load_file(path)


@budget(120)
@given(doc=mutated_documents(), unicode=st.booleans())
def test_broken_documents_are_rejected_with_file_field_and_reason(
    loader: ScenarioLoader, tmp_path_factory: pytest.TempPathFactory, doc: Any, unicode: bool
) -> None:
    tmp = tmp_path_factory.mktemp("doc")
    path, parsed, items = load(loader, tmp, _dump(doc, unicode))
    check_items(path, parsed, items)


def _bytes_of_seeds() -> st.SearchStrategy[bytes]:
    texts = [_dump(d).encode() for docs in SEEDS.values() for d in docs]
    return st.sampled_from(texts)


not_yaml = st.one_of(
    st.binary(max_size=200),
    # A file cut short, or with bytes flipped: what a bad copy or a bad editor leaves.
    st.tuples(_bytes_of_seeds(), st.floats(0, 1)).map(lambda t: t[0][: int(len(t[0]) * t[1])]),
    st.tuples(_bytes_of_seeds(), st.integers(0, 10**6), st.binary(min_size=1, max_size=4)).map(
        lambda t: t[0][: t[1] % max(len(t[0]), 1)] + t[2] + t[0][t[1] % max(len(t[0]), 1) + 1 :]
    ),
    # Deep documents, in flow style (as JSON is also YAML).
    deep_json().map(lambda text: b"domain: toy\nx: " + text.encode() + b"\n"),
    # Documents that are not a mapping, or are several.
    json_values().map(lambda v: _dump(v).encode()),
    _bytes_of_seeds().map(lambda b: b + b"---\n" + b),
    st.sampled_from(
        [
            b"",
            b"\n",
            b"~\n",
            b"\xef\xbb\xbf",
            b"\xff\xfe\x00\x00",
            b"domain: toy\x00\n",
            b"domain: toy\ndomain: sre\n",
            b"? [a]\n: 1\n",
            b"a: &a [*a]\n",
            b"domain: !!python/object:os.system {}\n",
            b"domain: toy\nid: !!binary aGVsbG8=\n",
            b"{{{{\n",
            b"\t- x\n",
        ]
    ),
)


@budget(80)
@given(data=not_yaml)
def test_files_that_are_not_yaml_or_not_mappings_are_rejected(
    loader: ScenarioLoader, tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path, parsed, items = load(loader, tmp_path_factory.mktemp("raw"), data)
    check_items(path, parsed, items)
    if not isinstance(parsed, dict):
        assert all(isinstance(i, ScenarioError) for i in items)


@pytest.mark.parametrize(
    "text",
    [
        "domain: toy\nx: " + "[" * 5000 + "]" * 5000 + "\n",
        "domain: toy\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        "domain: toy\n" + "".join(f"k{i}: {i}\n" for i in range(20000)),
        "domain: toy\nmatrix: {k: [" + ", ".join(map(str, range(5000))) + "]}\n",
        "domain: toy\ngoal: '" + "x" * 2_000_000 + "'\n",
        # Aliases that would expand to 10**8 values if copied.
        "domain: toy\nvalues: {a: 1}\n"
        + "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))
        + "matrix: {k: [1, 2]}\n",
    ],
    ids=["deep-lists", "deep-mappings", "many-keys", "many-variants", "long-string", "alias-bomb"],
)
def test_huge_and_deep_documents_are_rejected(
    loader: ScenarioLoader, tmp_path: Path, text: str
) -> None:
    path, parsed, items = load(loader, tmp_path, text)
    check_items(path, parsed, items)
    assert all(isinstance(i, ScenarioError) for i in items)
    assert len(items) <= MAX_PROBLEMS + 1  # the rest are counted, not listed


@st.composite
def single_mistakes(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A valid document with one known mistake: (document, field, words the reason holds)."""
    domain = draw(st.sampled_from(sorted(SEEDS)))
    doc: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(SEEDS[domain])))
    model = DOMAINS[domain].spec_model
    kind = draw(st.sampled_from(["unknown", "required", "complexity", "time_limit", "tags"]))
    if kind == "unknown":
        key = draw(names.filter(lambda k: k not in model.model_fields and k != "matrix"))
        doc[key] = draw(json_values(4))
        return doc, key, "Extra inputs"
    if kind == "required":
        required = [
            k
            for k in doc
            # The catalog gives a file without an id one from its domain and file name.
            if k in model.model_fields and model.model_fields[k].is_required() and k != "id"
        ]
        key = draw(st.sampled_from([k for k in required if k != "domain"] or ["goal"]))
        doc.pop(key, None)
        if key not in model.model_fields or not model.model_fields[key].is_required():
            doc["no_such_field"] = 1
            return doc, "no_such_field", "Extra inputs"
        return doc, key, "required"
    if kind == "complexity":
        doc["complexity"] = draw(
            st.one_of(
                any_text.filter(lambda t: t not in ("low", "medium", "high")),
                st.one_of(st.integers(), st.floats(), st.booleans(), st.none()),
            )
        )
        return doc, "complexity", "'low', 'medium' or 'high'"
    if kind == "time_limit":
        doc["time_limit"] = draw(
            st.one_of(
                st.floats(max_value=0),
                st.sampled_from([math.inf, -math.inf, math.nan, MAX_TIME_LIMIT * 2, 10**30]),
                any_text.filter(lambda t: not _is_number(t)),
            )
        )
        return doc, "time_limit", ""
    doc["tags"] = draw(st.one_of(any_text, st.integers(), st.lists(st.integers(), min_size=1)))
    return doc, "tags", ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@budget(80)
@given(case=single_mistakes())
def test_a_known_mistake_is_named_by_its_field(
    loader: ScenarioLoader, tmp_path_factory: pytest.TempPathFactory, case: tuple[Any, str, str]
) -> None:
    doc, field, words = case
    path, parsed, items = load(loader, tmp_path_factory.mktemp("one"), _dump(doc))
    check_items(path, parsed, items)
    # Every variant is rejected, and each for this field.
    assert items and all(isinstance(i, ScenarioError) for i in items)
    named = [i for i in items if isinstance(i, ScenarioError) and _top(i.field or "") == field]
    assert named, [i.line() for i in items if isinstance(i, ScenarioError)]
    assert all(words in i.reason for i in named), [i.reason for i in named]


@budget(40)
@given(
    docs=st.lists(mutated_documents(), min_size=1, max_size=4),
    patterns=st.lists(
        st.one_of(any_text, odd_ids.filter(lambda v: isinstance(v, str))), max_size=3
    ),
)
def test_a_catalog_of_broken_files_loads_and_answers_every_query(
    loader: ScenarioLoader,
    tmp_path_factory: pytest.TempPathFactory,
    docs: list[Any],
    patterns: list[str],
) -> None:
    root = tmp_path_factory.mktemp("catalog")
    for i, doc in enumerate(docs):
        (root / f"s{i}.yaml").write_text(_dump(doc), encoding="utf-8")
    catalog = loader.load([root])
    files = {p.resolve() for p in root.iterdir()}
    covered = {s.source_path for s in catalog.scenarios.values()} | {e.path for e in catalog.errors}
    assert covered == files, "every file is loaded or rejected"
    for sid, spec in catalog.scenarios.items():
        assert spec.id == sid
        # An id that also shows as rejected for a duplicate would run one copy of two.
        assert not any(e.field == "id" and e.scenario_id == sid for e in catalog.errors)
    for pattern in patterns:
        catalog.select([pattern])
        for error in catalog.rejected([pattern]):
            assert isinstance(error, ScenarioError)
        catalog.rejections_of(pattern)


def test_a_domain_spec_that_raises_rejects_the_file_not_the_catalog(
    loader: ScenarioLoader, tmp_path: Path
) -> None:
    toy = DOMAINS["toy"]

    class Buggy(toy.spec_model):  # type: ignore[name-defined,misc]
        @model_validator(mode="before")
        @classmethod
        def _bug(cls, data: Any) -> Any:
            raise KeyError("a bug of the plugin")

    buggy = copy.copy(toy)
    buggy.spec_model = Buggy
    path = tmp_path / "x.yaml"
    path.write_text(_dump(SEEDS["toy"][0]), encoding="utf-8")
    [error] = ScenarioLoader({"toy": buggy}).load_file(path)
    assert isinstance(error, ScenarioError) and error.path == path
    assert error.reason == "the toy domain's spec raised KeyError: 'a bug of the plugin'"


BAD_FILES = {
    "not-yaml.yaml": "domain: toy\ngoal: [unclosed\n",
    "a-list.yaml": "- domain: toy\n",
    "no-domain.yaml": "goal: g\n",
    "bad-time.yaml": "domain: toy\ngoal: g\ntask_types: [detection]\nvalues: {a: 1}\n"
    "ground_truth: {key: a, expected: 1}\ntime_limit: .inf\n",
    "bad-params.yaml": "domain: toy\ngoal: g\ntask_types: [detection]\nvalues: {a: 1}\n"
    "ground_truth: {key: a, expected: 1}\nparams: [1]\nmatrix: {k: [1, 2]}\n",
    "garbage.yaml": b"\xff\xfe\x00\x01\x02".decode("latin-1"),
    "deep.yaml": "domain: toy\nx: " + "[" * 3000 + "]" * 3000 + "\n",
}


def test_list_and_show_report_each_rejected_file_without_a_traceback(
    itbench: CliFn, tmp_path: Path
) -> None:
    catalog = tmp_path / "catalog" / "toy"
    catalog.mkdir(parents=True)
    for name, text in BAD_FILES.items():
        (catalog / name).write_text(text, encoding="latin-1" if name == "garbage.yaml" else "utf-8")
    res = itbench("list", "--scenario-path", str(tmp_path / "catalog"), "--domain", "toy")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for name in BAD_FILES:
        assert name in res.stderr, (name, res.stderr)
    assert "field 'time_limit'" in res.stderr and "field 'params'" in res.stderr
    shown = itbench("show", "toy/bad-params", "--scenario-path", str(tmp_path / "catalog"))
    assert shown.returncode != 0 and "Traceback" not in shown.stderr
    assert "bad-params.yaml" in shown.stderr and "field 'params'" in shown.stderr
