"""The "every entity, every edge" lister: names everything, in both directions, without looking.

It shows what free credit is left: it must pass no SRE problem but the controls it
cannot tell from incidents (it always answers "incident"). Standard library only::

    itbench evaluate --agent command -s 'sre/*' \\
        --option agent_command='python3 benchmarks/agents/sre_lister.py'
"""

from __future__ import annotations

import json

from sre_heuristic import read_task  # the program's own directory is on the path


def main() -> None:
    task = read_task()
    context = task.get("context", {})
    edges = [e.split("->") for e in context.get("edges", [])]
    answer = {
        "incident": True,
        "root_causes": list(context.get("entities", [])) + list(context.get("edges", [])),
        "fault_type": (context.get("fault_types") or [None])[0],
        "propagation": [[b, a] for a, b in edges] + [[a, b] for a, b in edges],
    }
    with open("submission.json", "w") as fh:
        json.dump(answer, fh)


if __name__ == "__main__":
    main()
