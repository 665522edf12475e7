"""What the property-based suites (``test_fuzz_*``) share: example budgets and strategies.

By default every suite runs a bounded number of examples, derandomized: the same examples on
every machine, so a red CI replays exactly. ``ITBENCH_FUZZ=N`` explores instead: N times the
examples, from random seeds (``--hypothesis-seed=S`` fixes one), with failing examples kept in
``.hypothesis/`` and replayed first on the next run; a failure also prints a
``@reproduce_failure`` line that replays it::

    ITBENCH_FUZZ=50 .venv/bin/python -m pytest tests -k fuzz
"""

from __future__ import annotations

import os
import string
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: How many times the written budgets a run explores (``ITBENCH_FUZZ``; 0 or unset: once).
SCALE = max(1, int(os.environ.get("ITBENCH_FUZZ", "0") or 0))

_HEALTH = [
    HealthCheck.too_slow,
    HealthCheck.function_scoped_fixture,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
]


def load_profile() -> None:
    """Register the suites' hypothesis profiles and load the one ``ITBENCH_FUZZ`` asks for."""
    settings.register_profile(
        "itbench",
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=25,
        print_blob=True,
        suppress_health_check=_HEALTH,
    )
    settings.register_profile(
        "itbench-explore",
        parent=settings.get_profile("itbench"),
        derandomize=False,
        database=settings.default.database if settings.default else None,
    )
    settings.load_profile("itbench-explore" if "ITBENCH_FUZZ" in os.environ else "itbench")


def budget(examples: int) -> settings:
    """Settings for a property: ``examples`` examples, times :data:`SCALE`."""
    return settings(max_examples=examples * SCALE)


#: Text of any Unicode character a YAML or JSON file can hold (no lone surrogates).
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
#: Names as a person would type them, and some that no one would.
names = st.one_of(
    st.text(string.ascii_lowercase + "_", min_size=1, max_size=12),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12),
)
#: Numbers at and past the edges: huge integers, infinities, NaN, negative zero.
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**20, max_value=10**60),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**4000]),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON-like value: scalars, lists and objects with text keys, nested."""
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def deep_json(min_depth: int = 50, max_depth: int = 5000) -> st.SearchStrategy[str]:
    """JSON text nested ``min_depth`` to ``max_depth`` levels (arrays and objects)."""
    return st.tuples(st.integers(min_depth, max_depth), st.booleans()).map(
        lambda t: "[" * t[0] + "]" * t[0] if t[1] else '{"a": ' * t[0] + "1" + "}" * t[0]
    )
