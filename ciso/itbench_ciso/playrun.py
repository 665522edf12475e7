"""Run one playbook with ansible-runner (the process the harness starts inside the sandbox).

``python -m itbench_ciso.playrun CONFIG.json`` reads ``private_data_dir``, ``playbook``,
``timeout`` and ``result``; runs the playbook against the inventory of the private data
directory only; and writes ``{"status", "rc", "facts", "output"}`` to ``result``, where
``facts`` holds the last value of the host fact ``evidence`` each host set and ``output`` the
end of the playbook's output. It runs inside the sandbox as a file of its own (it imports
nothing of the harness).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

_NONE = object()
#: Lines of the playbook's output kept in the result.
OUTPUT_LINES = 40


def main(argv: list[str] | None = None) -> int:
    """Run the configured playbook; exit 0 when it ran (whatever its outcome)."""
    args = argv if argv is not None else sys.argv[1:]
    config = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    pdd = Path(config["private_data_dir"])
    tmp = pdd / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    envvars = {
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp / "remote"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORKS": str(config.get("forks", 8)),
        "ANSIBLE_GATHERING": "explicit",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_INVENTORY_ENABLED": "yaml",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "TMPDIR": str(tmp),
        "HOME": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    os.environ.update(envvars)
    import ansible_runner

    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook=config["playbook"],
        inventory=str(pdd / "inventory" / "hosts.yml"),
        envvars=envvars,
        timeout=int(config["timeout"]),
        quiet=True,
        json_mode=False,
    )
    facts: dict[str, object] = {}
    for event in runner.events:
        if event.get("event") != "runner_on_ok":
            continue
        data = event.get("event_data") or {}
        found = ((data.get("res") or {}).get("ansible_facts") or {}).get("evidence", _NONE)
        if found is not _NONE and data.get("host"):
            facts[str(data["host"])] = found
    try:
        output = runner.stdout.read()
    except (OSError, AttributeError, ValueError):
        output = ""
    tail = "\n".join(output.splitlines()[-OUTPUT_LINES:])
    Path(config["result"]).write_text(
        json.dumps({"status": runner.status, "rc": runner.rc, "facts": facts, "output": tail}),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
