"""The judge's conformance suite on every worker engine: cases passed and the differences.

Each case is a Rego idiom agents write with OPA's documented result
(``itbench_ciso/conformance.py``); the default engine is the one that passes the most.
"""

from __future__ import annotations

from itbench_ciso.conformance import CASES, failures
from itbench_ciso.engine import DEFAULT_ENGINE, WorkerEngine


def main() -> None:
    print(f"Rego conformance: {len(CASES)} cases with OPA's documented results")
    for name in ("regorus", "regopy"):
        engine = WorkerEngine(name)
        try:
            wrong = failures(engine)
        finally:
            engine.close()
        mark = " (default)" if name == DEFAULT_ENGINE else ""
        print(f"  {name:<8}{mark:<10} {len(CASES) - len(wrong)} of {len(CASES)} cases")
        for case, got in sorted(wrong.items()):
            print(f"      {case}: got {got!r}"[:160])


if __name__ == "__main__":
    main()
