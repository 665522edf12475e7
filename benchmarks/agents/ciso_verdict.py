"""A CISO agent that answers the same verdict everywhere: ``always`` or ``never`` a violation.

``python3 ciso_verdict.py always`` flags every object (every host or account); ``never``
flags nothing. Evidence is collected as an empty document. For a policy set, every policy
gets the same body under its own package. Standard library only (it runs sandboxed).
"""

from __future__ import annotations

import json
import re
import sys

HEAD = "package {package}\n\nimport rego.v1\n\n"
ALWAYS_OBJECTS = (
    'violations contains {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), '
    '"name": o.metadata.name} if {\n\tsome o in input.items\n}\n'
)
ALWAYS_SYSTEM = 'violations contains "non-compliant"\n'
NEVER = "violations := set()\n"
PLAYBOOK = """---
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        evidence: {}
"""


def main() -> int:
    """Print the submission for the task on standard input."""
    verdict = sys.argv[1] if len(sys.argv) > 1 else "always"
    task = json.load(sys.stdin)
    names = {t["name"] for t in task.get("tools", [])}
    objects = "kubectl_get" in names
    body = NEVER if verdict == "never" else (ALWAYS_OBJECTS if objects else ALWAYS_SYSTEM)
    if "read_policies" in names:
        files = (task.get("context") or {}).get("policy_files") or []
        folder = (task.get("context") or {}).get("policy_set") or ""
        out = {}
        for name in files:
            with open(f"{folder}/{name}", encoding="utf-8") as fh:
                found = re.search(r"^package\s+(\S+)", fh.read(), re.MULTILINE)
            out[name] = HEAD.format(package=found.group(1) if found else "compliance") + body
        print(json.dumps({"policies": out}))
        return 0
    sub = {"policy": HEAD.format(package="compliance") + body}
    if "run_collector" in names:
        sub["collector"] = "print('{}')\n"
    elif not objects:
        sub["playbook"] = PLAYBOOK
    print(json.dumps(sub))
    return 0


if __name__ == "__main__":
    sys.exit(main())
