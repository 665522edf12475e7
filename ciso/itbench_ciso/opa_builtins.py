"""OPA's semantics for the built-ins and idioms where regorus gives another result.

The regorus worker installs these functions in place of regorus's own (``add_extension``) and
rewrites the one idiom an extension cannot serve (:func:`rewrite_walk`). Each follows OPA's
implementation of the built-in (``topdown/*.go``) and the Go library it calls; an error raised
here is an error of the policy, as a built-in's error is under ``--strict-builtin-errors``.
The conformance suite (:mod:`itbench_ciso.conformance`) holds a case for each.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import yaml

#: A number as Go's strconv.ParseFloat reads it (decimal, optional sign and exponent).
_GO_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _string(name: str, position: int, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: operand {position} must be string but got {_type(value)}")
    return value


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (set, frozenset)):
        return "set"
    return "array"


def _int(name: str, position: int, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: operand {position} must be number but got {_type(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(
            f"{name}: operand {position} must be integer number but got floating-point"
        )
    return int(value)


def to_number(value: Any) -> int | float:
    """``to_number``: regorus refuses ``"007"`` and ``"+1"`` and accepts ``" 1"``, OPA the opposite.

    Raises:
        ValueError: the value is not a number string (an error of the policy).
    """
    if value is None or isinstance(value, bool):
        return int(bool(value))
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        raise ValueError("to_number: operand 1 must be one of null, boolean, number, string")
    if value.lstrip("+-").lower() in ("inf", "infinity", "nan") or not _GO_FLOAT.fullmatch(value):
        raise ValueError(f"to_number: cannot parse {value!r} as a number")
    number = float(value)
    return int(number) if number.is_integer() and not re.search(r"[.eE]", value) else number


def strings_count(search: Any, substring: Any) -> int:
    """``strings.count``: non-overlapping matches, as Go's ``strings.Count``.

    An empty substring counts once more than the string has characters. regorus counts
    overlapping matches and panics on an empty substring.
    """
    text = _string("strings.count", 1, search)
    sub = _string("strings.count", 2, substring)
    return len(text) + 1 if sub == "" else text.count(sub)


def strings_split_n(text: Any, delimiter: Any, n: Any) -> list[str]:
    """``strings.split_n`` (OPA 1.x; regorus lacks it).

    The first ``n`` fields for ``n >= 0`` (the rest dropped), the last ``-n`` fields for a
    negative ``n``.
    """
    s = _string("strings.split_n", 1, text)
    d = _string("strings.split_n", 2, delimiter)
    count = _int("strings.split_n", 3, n)
    parts = list(s) if d == "" else s.split(d)
    return parts[:count] if count >= 0 else parts[max(len(parts) + count, 0) :]


def strings_replace_n(patterns: Any, value: Any) -> str:
    """``strings.replace_n``: one pass, as Go's ``strings.NewReplacer`` with the keys sorted.

    At each position the first key (in that order) that matches is replaced and the scan goes
    on after it, so a replacement is never replaced again. regorus applies the keys one after
    another, each to the previous one's output.
    """
    if not isinstance(patterns, dict):
        raise ValueError(f"strings.replace_n: operand 1 must be object but got {_type(patterns)}")
    s = _string("strings.replace_n", 2, value).encode()
    pairs: list[tuple[bytes, bytes]] = []
    for key in sorted(patterns, key=lambda k: (not isinstance(k, str), str(k))):
        new = patterns[key]
        if not isinstance(key, str):
            raise ValueError("strings.replace_n: operand 1 non-string key found in pattern object")
        if not isinstance(new, str):
            raise ValueError(
                "strings.replace_n: operand 1 non-string value found in pattern object"
            )
        pairs.append((key.encode(), new.encode()))
    out = bytearray()
    i = last = 0
    previous_empty = False
    while i <= len(s):
        found = None
        for old, new in pairs:
            if old == b"" and previous_empty:
                continue  # Go skips the empty key right after an empty match
            if s.startswith(old, i):
                found = (old, new)
                break
        previous_empty = found is not None and found[0] == b""
        if found is None:
            i += 1
            continue
        out += s[last:i] + found[1]
        i += len(found[0])
        last = i
    out += s[last:]
    return out.decode(errors="replace")


def array_flatten(value: Any) -> list[Any]:
    """``array.flatten`` (OPA 1.x; regorus lacks it): each array element spliced in, one level."""
    if not isinstance(value, list):
        raise ValueError(f"array.flatten: operand 1 must be array but got {_type(value)}")
    out: list[Any] = []
    for item in value:
        if isinstance(item, list):
            out.extend(item)
        else:
            out.append(item)
    return out


def _first_document(text: str) -> str:
    """The text of ``text``'s first YAML document (Go's YAML decoder reads only that one)."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.DocumentEndEvent) and event.end_mark is not None:
                return text[: event.end_mark.index]
    except yaml.YAMLError:
        pass  # the engine's own parser judges a text PyYAML cannot split
    return text


@functools.cache
def _regorus_builtin(name: str, nargs: int) -> Callable[..., Any]:
    """``name`` as a plain regorus engine computes it (for the inputs it gets right)."""
    import regorus

    engine = regorus.Engine()
    args = ", ".join(f"input[{i}]" for i in range(nargs))
    engine.add_policy("builtin.rego", f"package builtin\n\nx := {name}({args})\n")

    def call(*values: Any) -> Any:
        engine.set_input(list(values))
        try:
            return engine.eval_rule("data.builtin.x")
        except RuntimeError as exc:
            raise ValueError(" ".join(str(exc).split("Stack backtrace:")[0].split())) from None

    return call


def yaml_is_valid(value: Any) -> bool:
    """``yaml.is_valid``: false for a non-string (regorus raises).

    A multi-document text is judged by its first document, the one OPA's decoder reads
    (regorus refuses it).
    """
    if not isinstance(value, str):
        return False
    return bool(_regorus_builtin("yaml.is_valid", 1)(_first_document(value)))


def yaml_unmarshal(value: Any) -> Any:
    """``yaml.unmarshal``: of a multi-document text, its first document (regorus refuses it)."""
    return _regorus_builtin("yaml.unmarshal", 1)(
        _first_document(_string("yaml.unmarshal", 1, value))
    )


def json_is_valid(value: Any) -> bool:
    """``json.is_valid``: false for a non-string (regorus raises)."""
    return isinstance(value, str) and bool(_regorus_builtin("json.is_valid", 1)(value))


# --- glob.match (the gobwas/glob library OPA calls) ------------------------------------------


def glob_regex(pattern: str, delimiters: list[str]) -> re.Pattern[str]:
    r"""The regular expression of a gobwas glob.

    ``*`` is any run of non-delimiters, ``**`` any run, ``?`` one non-delimiter;
    ``[abc]``, ``[!abc]``, ``[a-z]`` and ``[!a-z]`` are classes, ``{a,b}`` alternatives
    (nested, empty ones too), and ``\`` escapes the next character.

    Raises:
        ValueError: the pattern does not compile (an unclosed class or group).
    """
    other = "[^" + "".join(re.escape(d) for d in delimiters) + "]" if delimiters else "."
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
            if i == len(pattern):
                raise ValueError(f"glob.match: unexpected end of pattern {pattern!r}")
            out.append(re.escape(pattern[i]))
        elif c == "*":
            if pattern.startswith("**", i):
                out.append(".*")
                i += 1
            else:
                out.append(other + "*")
        elif c == "?":
            out.append(other)
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise ValueError(f"glob.match: unclosed character class in {pattern!r}")
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if len(body) == 3 and body[1] == "-":
                chars = f"{re.escape(body[0])}-{re.escape(body[2])}"
            else:
                chars = "".join(re.escape(ch) for ch in body)
            if not chars:
                raise ValueError(f"glob.match: empty character class in {pattern!r}")
            out.append(f"[{'^' if negate else ''}{chars}]")
            i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ValueError(f"glob.match: unclosed group in {pattern!r}")
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: Any, delimiters: Any, match: Any) -> bool:
    """``glob.match``: ``null`` delimiters mean none, an empty array means ``["."]``.

    regorus loses empty alternatives (``{**/,}x`` does not match ``x``) and lets ``**/``
    match nothing.
    """
    text = _string("glob.match", 1, pattern)
    if delimiters is None:
        seps: list[str] = []
    elif isinstance(delimiters, list):
        seps = []
        for d in delimiters:
            if not isinstance(d, str) or len(d) != 1:
                raise ValueError("glob.match: operand 2 must be an array of one-character strings")
            seps.append(d)
        seps = seps or ["."]
    else:
        raise ValueError(
            f"glob.match: operand 2 must be one of array, null but got {_type(delimiters)}"
        )
    return glob_regex(text, seps).fullmatch(_string("glob.match", 3, match)) is not None


#: name -> (number of arguments, implementation) installed in regorus.
EXTENSIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "to_number": (1, to_number),
    "strings.count": (2, strings_count),
    "strings.split_n": (3, strings_split_n),
    "strings.replace_n": (2, strings_replace_n),
    "array.flatten": (1, array_flatten),
    "json.is_valid": (1, json_is_valid),
    "yaml.is_valid": (1, yaml_is_valid),
    "yaml.unmarshal": (1, yaml_unmarshal),
    "glob.match": (3, glob_match),
}


# --- `[path, value] := walk(x)` ----------------------------------------------------------------

_TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<raw>`[^`]*`)|(?P<comment>#[^\n]*)'
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>:=|==|!=|<=|>=|[=(),\[\]{};|\n])|(?P<other>.)",
    re.DOTALL,
)
_END = {"\n", ";", "}", "]", ")", "|", None}


def rewrite_walk(source: str) -> str:
    """``TERM := walk(x)`` and ``TERM = walk(x)`` written as ``walk(x, TERM)``.

    OPA treats the one-argument call as the relation it is (each ``[path, value]`` in turn);
    regorus yields nothing for it. Only a call that is a whole expression's right-hand side is
    rewritten, with its line breaks kept so error positions stay where they were.
    """
    tokens = [
        (m.start(), m.end(), m.lastgroup or "", m.group())
        for m in _TOKEN.finditer(source)
        if m.lastgroup != "comment" and not (m.lastgroup == "other" and m.group().isspace())
    ]
    # The bracket each token stands in: a rule head (none) is never rewritten, a body is.
    enclosing: list[str | None] = []
    stack: list[str] = []
    for _, _, _, text in tokens:
        enclosing.append(stack[-1] if stack else None)
        if text in ("(", "[", "{"):
            stack.append(text)
        elif text in (")", "]", "}") and stack:
            stack.pop()
    edits: list[tuple[int, int, str]] = []
    for k, (_, _, kind, text) in enumerate(tokens):
        if not (kind == "name" and text == "walk" and k >= 2 and k + 1 < len(tokens)):
            continue
        if enclosing[k] not in ("{", "["):
            continue
        if tokens[k - 1][3] not in (":=", "=") or tokens[k + 1][3] != "(":
            continue
        close = _matching(tokens, k + 1)
        if close is None or _top_level_commas(tokens, k + 1, close):
            continue
        following = tokens[close + 1][3] if close + 1 < len(tokens) else None
        if following not in _END:
            continue
        start = _term_start(tokens, k - 2)
        if start is None:
            continue
        lhs = source[tokens[start][0] : tokens[k - 2][1]]
        arg = source[tokens[k + 1][1] : tokens[close][0]]
        old = source[tokens[start][0] : tokens[close][1]]
        new = f"walk({arg}, {lhs})".replace("\n", " ") + "\n" * old.count("\n")
        edits.append((tokens[start][0], tokens[close][1], new))
    for begin, end, new in reversed(edits):
        source = source[:begin] + new + source[end:]
    return source


def _matching(tokens: list[tuple[int, int, str, str]], open_at: int) -> int | None:
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[tokens[open_at][3]]]
    for j in range(open_at + 1, len(tokens)):
        text = tokens[j][3]
        if text in pairs:
            stack.append(pairs[text])
        elif text in (")", "]", "}"):
            if text != stack.pop():
                return None
            if not stack:
                return j
    return None


def _top_level_commas(tokens: list[tuple[int, int, str, str]], open_at: int, close: int) -> bool:
    depth = 0
    for j in range(open_at + 1, close):
        text = tokens[j][3]
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif text == "," and depth == 0:
            return True
    return False


def _term_start(tokens: list[tuple[int, int, str, str]], last: int) -> int | None:
    """Where the term ending at token ``last`` starts: a variable or a bracketed array."""
    kind, text = tokens[last][2], tokens[last][3]
    if kind == "name":
        before = tokens[last - 1][3] if last else None
        return last if before in _END or before in ("{", "[", "(", "some") else None
    if text != "]":
        return None
    depth = 0
    for j in range(last, -1, -1):
        if tokens[j][3] == "]":
            depth += 1
        elif tokens[j][3] == "[":
            depth -= 1
            if depth == 0:
                before = tokens[j - 1][3] if j else None
                return j if before in _END or before in ("{", "[", "(") else None
    return None
