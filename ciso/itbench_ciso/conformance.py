"""The judge's conformance suite: Rego idioms agents write, each with OPA's documented result.

Every case is a module ``package conformance`` (Rego v1) whose rule ``x`` is queried; the
expected value is what OPA's documentation gives for it (language reference, built-in
function reference, with ``--strict-builtin-errors``: a built-in function's error halts
evaluation). It was written from that documentation, never from an engine's output.

``ciso/tests/test_conformance.py`` runs it on every engine the domain offers: the default
engine passes every case; the differences of the others are listed there and in the README.
``benchmarks/ciso_conformance.py`` prints the figures per engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from itbench_ciso.engine import PolicyEngine, PolicyError

#: The query of every case.
QUERY = "data.conformance.x"


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The rule is undefined (no value, no error).
UNDEFINED = _Marker("UNDEFINED")
#: Evaluation halts with an error of the policy (at compile time or at run time).
ERROR = _Marker("ERROR")


@dataclass(frozen=True)
class Set:
    """An expected Rego set (engines hand sets over as arrays in any order)."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Case:
    """One idiom: the rules of the module, its input and OPA's result for ``x``."""

    name: str
    rules: str
    expected: Any
    input: Any = field(default_factory=dict)

    def module(self) -> str:
        """The whole module."""
        return f"package conformance\n\nimport rego.v1\n\n{self.rules.strip()}\n"


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def normalise(expected: Any) -> Any:
    """``expected`` in the form engines answer: sets as sorted arrays."""
    if isinstance(expected, Set):
        return sorted((normalise(v) for v in expected.items), key=_key)
    if isinstance(expected, list):
        return [normalise(v) for v in expected]
    if isinstance(expected, dict):
        return {k: normalise(v) for k, v in expected.items()}
    return expected


def _sorted_sets(value: Any, shape: Any) -> Any:
    """``value`` with the arrays standing where ``shape`` has a set sorted (OPA's JSON)."""
    if isinstance(shape, Set) and isinstance(value, list):
        return sorted(value, key=_key)
    if isinstance(shape, list) and isinstance(value, list) and len(shape) == len(value):
        return [_sorted_sets(v, s) for v, s in zip(value, shape, strict=True)]
    if isinstance(shape, dict) and isinstance(value, dict):
        return {k: _sorted_sets(v, shape.get(k)) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    """Equality with Rego's numbers (1 and 1.0 are the same number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def outcome(engine: PolicyEngine, case: Case) -> Any:
    """What ``engine`` gives for ``case``: a value, :data:`UNDEFINED` or :data:`ERROR`.

    Raises:
        RuntimeError: the engine itself failed (not the policy).
    """
    modules = {"conformance.rego": case.module()}
    if engine.compile(modules) is not None:
        return ERROR
    try:
        [verdict] = engine.evaluate(modules, QUERY, [case.input])
    except PolicyError:
        return ERROR
    if verdict.engine_failed:
        raise RuntimeError(f"{case.name}: the engine failed: {verdict.error}")
    if verdict.error is not None:
        return ERROR
    if verdict.value is None:
        return UNDEFINED
    return _sorted_sets(verdict.value, case.expected)


def passes(engine: PolicyEngine, case: Case) -> tuple[bool, Any]:
    """Whether ``engine`` gives OPA's result for ``case``, and what it gave."""
    try:
        got = outcome(engine, case)
    except RuntimeError as exc:
        return False, f"engine failure: {exc}"
    if isinstance(case.expected, _Marker):
        return got is case.expected, got
    return (not isinstance(got, _Marker) and _same(got, normalise(case.expected))), got


def failures(engine: PolicyEngine) -> dict[str, Any]:
    """The cases ``engine`` gets wrong: name -> what it gave."""
    out = {}
    for case in CASES:
        ok, got = passes(engine, case)
        if not ok:
            out[case.name] = got
    return out


_MSG = 'msg := sprintf("MaxAuthTries is %v, must be 4 or less", [v])'

CASES: list[Case] = [
    # --- sprintf: each verb, on literals and on values taken from the input ------------------
    Case("sprintf %v string literal", 'x := sprintf("%v", ["abc"])', "abc"),
    Case(
        "sprintf %v string from input",
        'x := sprintf("value %v", [input.s])',
        "value ab c",
        {"s": "ab c"},
    ),
    Case("sprintf %s string from input", 'x := sprintf("<%s>", [input.s])', "<a b>", {"s": "a b"}),
    Case(
        "sprintf %v of a string holding quotes",
        'x := sprintf("got %v", [input.s])',
        'got say "hi"',
        {"s": 'say "hi"'},
    ),
    Case(
        "sprintf %v of a regex.split part",
        f"x := msg if {{\n\tparts := regex.split(`\\s+`, input.line)\n\tv := parts[1]\n\t{_MSG}\n}}",
        "MaxAuthTries is 10, must be 4 or less",
        {"line": "MaxAuthTries 10"},
    ),
    Case(
        "sprintf %v of a split part",
        f'x := msg if {{\n\tv := split(input.line, " ")[1]\n\t{_MSG}\n}}',
        "MaxAuthTries is 6, must be 4 or less",
        {"line": "MaxAuthTries 6"},
    ),
    Case("sprintf %q", 'x := sprintf("%q", [input.s])', '"a\\"b"', {"s": 'a"b'}),
    Case("sprintf %d", 'x := sprintf("%d items", [input.n])', "3 items", {"n": 3}),
    Case("sprintf %v integer", 'x := sprintf("%v", [42])', "42"),
    Case("sprintf %v float", 'x := sprintf("%v", [1.5])', "1.5"),
    Case("sprintf %.2f", 'x := sprintf("%.2f", [2.5])', "2.50"),
    Case("sprintf %x", 'x := sprintf("%x", [255])', "ff"),
    Case("sprintf %v boolean", 'x := sprintf("%v", [input.b])', "true", {"b": True}),
    Case("sprintf %v null", 'x := sprintf("%v", [null])', "null"),
    Case("sprintf %v array", 'x := sprintf("%v", [["a", 1]])', '["a", 1]'),
    Case("sprintf %v object", 'x := sprintf("%v", [{"a": 1}])', '{"a": 1}'),
    Case("sprintf %v set", 'x := sprintf("%v", [{1}])', "{1}"),
    Case("sprintf %v of to_number", 'x := sprintf("%v", [to_number(input.s)])', "10", {"s": "10"}),
    Case("sprintf width", 'x := sprintf("[%5s]", ["ab"])', "[   ab]"),
    Case("sprintf several values", 'x := sprintf("%s/%s: %d", ["ns", "pod", 2])', "ns/pod: 2"),
    Case("sprintf %%", 'x := sprintf("100%% of %v", ["x"])', "100% of x"),
    # --- strings: quotes and escapes ------------------------------------------------------------
    Case("escaped newline splits", 'x := split("a\\nb", "\\n")', ["a", "b"]),
    Case("escaped newline counts once", 'x := count("a\\nb")', 3),
    Case("escaped tab", 'x := split("a\\tb", "\\t")', ["a", "b"]),
    Case("escaped quotes", 'x := "say \\"hi\\""', 'say "hi"'),
    Case("escaped backslash", 'x := count("a\\\\b")', 3),
    Case("unicode escape", 'x := "caf\\u00e9"', "café"),
    Case("raw string keeps backslashes", "x := count(`a\\nb`)", 4),
    Case("raw string regex", 'x := regex.match(`^\\d+$`, "123")', True),
    Case(
        "split on input newlines",
        'x := split(input.text, "\\n")',
        ["a", "b", ""],
        {"text": "a\nb\n"},
    ),
    Case("string equality with quotes", 'x := input.s == "a\\"b"', True, {"s": 'a"b'}),
    Case("concat", 'x := concat(", ", ["a", "b"])', "a, b"),
    # --- comprehensions --------------------------------------------------------------------------
    Case("array comprehension", "x := [z | some y in [1, 2, 3]; z := y * 2]", [2, 4, 6]),
    # The head of a comprehension is a term (the grammar's array-compr), not an expression.
    Case("arithmetic comprehension head", "x := [y * 2 | some y in [1, 2, 3]]", ERROR),
    Case("set comprehension", "x := {y | some y in [1, 1, 2]}", Set((1, 2))),
    Case(
        "object comprehension",
        'x := {k: v | some k, v in {"a": 1, "b": 2}; v > 1}',
        {"b": 2},
    ),
    Case(
        "some k, v in inside an array comprehension",
        "x := [k | some k, v in input.o; v == 1]",
        ["a"],
        {"o": {"a": 1, "b": 2}},
    ),
    Case(
        "some i, v in over an array inside a comprehension",
        'x := [i | some i, v in input.l; v == "b"]',
        [1],
        {"l": ["a", "b"]},
    ),
    Case(
        "nested comprehension", "x := [[y | some y in l] | some l in [[1], [2, 3]]]", [[1], [2, 3]]
    ),
    Case(
        "comprehension over input items",
        'x := {p.name | some p in input.items; p.ns == "default"}',
        Set(("a",)),
        {"items": [{"name": "a", "ns": "default"}, {"name": "b", "ns": "kube"}]},
    ),
    # --- every, in, some -------------------------------------------------------------------------
    Case("every true", "x if every v in [1, 2] { v > 0 }", True),
    Case("every false is undefined", "x if every v in [1, -2] { v > 0 }", UNDEFINED),
    Case("every on empty is true", "x if every v in [] { v > 0 }", True),
    Case("every key and value", 'x if every k, v in {"a": 1} { k == "a"; v == 1 }', True),
    Case("in array", 'x := "a" in ["a", "b"]', True),
    Case("in set", 'x := "c" in {"a", "b"}', False),
    Case("in object checks values", 'x := ["a" in {"a": 1}, 1 in {"a": 1}]', [False, True]),
    Case("not in", 'x if not "z" in input.l', True, {"l": ["a"]}),
    Case("some in with index", 'x := {i | some i, v in ["a", "b", "a"]; v == "a"}', Set((0, 2))),
    Case("some x in object iterates values", 'x := [v | some v in {"a": 1}]', [1]),
    # --- else, default, functions ----------------------------------------------------------------
    Case(
        "else chain",
        'f(n) := "big" if {\n\tn > 10\n} else := "small"\n\nx := [f(20), f(1)]',
        ["big", "small"],
    ),
    Case("default value", "default x := 0\n\nx := 1 if input.on", 0, {"on": False}),
    Case("function with several definitions", 'f(1) := "one"\n\nf(2) := "two"\n\nx := f(2)', "two"),
    Case("undefined rule", "x := input.missing.deeper", UNDEFINED),
    Case(
        "object.get with default", 'x := object.get(input, ["a", "b"], "none")', "none", {"a": {}}
    ),
    # --- sets and objects ------------------------------------------------------------------------
    Case("empty braces are an object", "x := [is_object({}), is_set(set())]", [True, True]),
    Case("set union", "x := {1, 2} | {2, 3}", Set((1, 2, 3))),
    Case("set intersection", "x := {1, 2} & {2, 3}", Set((2,))),
    Case("set difference", "x := {1, 2} - {2}", Set((1,))),
    Case("sets compare without order", "x := {1, 2} == {2, 1}", True),
    Case(
        "partial set rule of objects",
        'x contains {"name": n} if some n in input.names',
        Set(({"name": "a"}, {"name": "b"})),
        {"names": ["b", "a", "a"]},
    ),
    Case(
        "partial object rule",
        "x[k] := count(v) if some k, v in input.o",
        {"a": 2},
        {"o": {"a": [1, 2]}},
    ),
    Case("object.keys is a set", 'x := object.keys({"a": 1, "b": 2})', Set(("a", "b"))),
    Case("count of a set", "x := count({1, 1, 2})", 2),
    Case("numbers equal across int and float", "x := 1 == 1.0", True),
    # --- string built-ins ------------------------------------------------------------------------
    Case("lower and upper", 'x := [lower("AbC"), upper("a")]', ["abc", "A"]),
    Case("trim_space", 'x := trim_space("  a b \\t")', "a b"),
    Case(
        "startswith and endswith",
        'x := [startswith("abc", "ab"), endswith("abc", "bc")]',
        [True, True],
    ),
    Case("contains", 'x := contains("a=b", "=")', True),
    Case("replace", 'x := replace("a-b-c", "-", "_")', "a_b_c"),
    Case("substring", 'x := substring("abcdef", 2, 3)', "cde"),
    Case("indexof", 'x := indexof("abcb", "b")', 1),
    Case("trim_prefix", 'x := trim_prefix("v1.2", "v")', "1.2"),
    Case("format_int", "x := format_int(255, 16)", "ff"),
    Case("strings.replace_n", 'x := strings.replace_n({"a": "1", "b": "2"}, "ab")', "12"),
    # --- regular expressions ---------------------------------------------------------------------
    Case("regex.match", 'x := regex.match("^Port\\\\s+22$", "Port 22")', True),
    Case("regex.split", 'x := regex.split(`[\\s=]+`, "Key = value")', ["Key", "value"]),
    Case("regex.find_n", 'x := regex.find_n("[0-9]+", "a1b22c", -1)', ["1", "22"]),
    Case("regex.replace", 'x := regex.replace("a1b2", "[0-9]", "")', "ab"),
    Case(
        "regex submatches",
        'x := regex.find_all_string_submatch_n("(\\\\w+)=(\\\\d+)", "a=1 b=2", -1)',
        [["a=1", "a", "1"], ["b=2", "b", "2"]],
    ),
    Case("regex.is_valid", 'x := regex.is_valid("(")', False),
    Case("glob.match", 'x := glob.match("*.conf", [], "99-x.conf")', True),
    # --- numbers ---------------------------------------------------------------------------------
    Case("to_number integer", 'x := to_number("42")', 42),
    Case("to_number float", 'x := to_number("4.5")', 4.5),
    Case("to_number with leading zeros", "x := to_number(input.uid)", 7, {"uid": "007"}),
    Case("to_number with a sign", 'x := [to_number("+1"), to_number("-2")]', [1, -2]),
    Case("to_number of a padded string", 'x := to_number(" 1")', ERROR),
    Case("to_number of null and booleans", "x := [to_number(null), to_number(true)]", [0, 1]),
    Case("division gives a fraction", "x := 7 / 2", 3.5),
    Case("remainder", "x := 7 % 3", 1),
    Case("round", "x := [round(2.4), round(2.6)]", [2, 3]),
    Case("abs, ceil, floor", "x := [abs(-2), ceil(1.2), floor(1.8)]", [2, 2, 1]),
    Case("numbers.range", "x := numbers.range(1, 3)", [1, 2, 3]),
    Case("sum, max, min", "x := [sum([1, 2]), max([1, 3]), min([2, 5])]", [3, 3, 2]),
    Case("units.parse_bytes", 'x := units.parse_bytes("1Ki")', 1024),
    Case("units.parse", 'x := units.parse("500m")', 0.5),
    Case("bits.and", "x := bits.and(6, 3)", 2),
    Case("comparison of a number from input", "x if input.n <= 4", True, {"n": 4}),
    # --- time --------------------------------------------------------------------------------------
    Case(
        "time.parse_rfc3339_ns",
        'x := time.parse_rfc3339_ns("2024-01-02T03:04:05Z")',
        1704164645000000000,
    ),
    Case("time.date", "x := time.date(0)", [1970, 1, 1]),
    Case("time.parse_duration_ns", 'x := time.parse_duration_ns("1h")', 3600000000000),
    Case("time.weekday", "x := time.weekday(0)", "Thursday"),
    Case("time.add_date", "x := time.add_date(0, 0, 0, 1)", 86400000000000),
    Case(
        "time.diff",
        "x := time.diff(0, 90061000000000)",
        [0, 0, 1, 1, 1, 1],
    ),
    # --- JSON and other encodings ---------------------------------------------------------------
    Case("json.unmarshal", "x := json.unmarshal(input.doc)", {"a": [1, 2]}, {"doc": '{"a":[1,2]}'}),
    Case("json.marshal", 'x := json.marshal({"a": [1, "b"]})', '{"a":[1,"b"]}'),
    Case("json.is_valid", 'x := [json.is_valid("{}"), json.is_valid("{")]', [True, False]),
    Case("yaml.unmarshal", 'x := yaml.unmarshal("a: 1\\nb: [x]")', {"a": 1, "b": ["x"]}),
    Case("base64 round trip", 'x := base64.decode(base64.encode("hi"))', "hi"),
    Case(
        "json.patch",
        'x := json.patch({"a": 1}, [{"op": "add", "path": "/b", "value": 2}])',
        {"a": 1, "b": 2},
    ),
    Case("walk", "x := [p | walk(input, [p, v]); v == 2]", [["a", "b"]], {"a": {"b": 2}}),
    Case(
        "walk as a relation on the right of :=",
        "x := {p | [p, v] := walk(input); v == 1}",
        Set((["a"], ["b", "c"])),
        {"a": 1, "b": {"c": 1}},
    ),
    # --- built-ins whose result OPA's implementation (and the Go library it calls) defines -------
    Case("strings.count counts without overlap", 'x := strings.count("11111", "11")', 2),
    Case("strings.count of an empty substring", 'x := strings.count("abc", "")', 4),
    Case("json.is_valid of a number", "x := json.is_valid(1)", False),
    Case("yaml.is_valid of a number", "x := yaml.is_valid(1)", False),
    Case("yaml.is_valid of two documents", 'x := yaml.is_valid("a: 1\\n---\\nb: 2\\n")', True),
    Case(
        "yaml.unmarshal of two documents", 'x := yaml.unmarshal("a: 1\\n---\\nb: 2\\n")', {"a": 1}
    ),
    Case("glob.match empty alternative", 'x := glob.match("{**/,}x", [], "x")', True),
    Case("glob.match **/ needs its delimiter", 'x := glob.match("**/x", ["/"], "x")', False),
    Case("glob.match null delimiters", 'x := glob.match("a*", null, "a.b/c")', True),
    Case(
        "strings.replace_n in one pass", 'x := strings.replace_n({"a": "b", "b": "c"}, "ab")', "bc"
    ),
    Case(
        "strings.replace_n with an empty key",
        'x := strings.replace_n({"": "X", "o": "O"}, "oo")',
        "XOXOX",
    ),
    Case(
        "strings.split_n",
        'x := [strings.split_n("a,b,c", ",", 2), strings.split_n("a,b,c", ",", -2)]',
        [["a", "b"], ["b", "c"]],
    ),
    Case("array.flatten", "x := array.flatten([[1, 2], 3, [4]])", [1, 2, 3, 4]),
    Case("number beyond 64-bit floats", "x := 1e400 > 1", True),
    # --- errors of the policy (OPA halts evaluation) ---------------------------------------------
    Case(
        "conflicting values of a complete rule",
        "x := 1 if input.a\n\nx := 2 if input.b",
        ERROR,
        {"a": True, "b": True},
    ),
    Case("function with two outputs", "f(_) := 1\n\nf(_) := 2\n\nx := f(0)", ERROR),
    Case("call of an unknown function", "x := no.such_function(1)", ERROR),
    Case(
        "to_number of a word (strict built-in errors)",
        "x := to_number(input.s)",
        ERROR,
        {"s": "ten"},
    ),
    Case("division by zero (strict built-in errors)", "x := input.n / 0", ERROR, {"n": 1}),
    Case("count of a number (type error)", "x := count(input.n)", ERROR, {"n": 1}),
    Case("syntax error", "x := [1, 2", ERROR),
]
