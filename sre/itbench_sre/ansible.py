"""Runs the environment's playbooks through ansible-runner against the local machine."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from itbench import InfrastructureError

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


def run_playbook(name: str, private_dir: Path, extravars: dict[str, Any]) -> None:
    """Run ``playbooks/<name>.yml`` on localhost.

    Raises:
        InfrastructureError: the playbook failed; the message names it and its last output.
    """
    import ansible_runner

    private_dir.mkdir(parents=True, exist_ok=True)
    bindir = str(Path(sys.executable).parent)
    envvars = {
        "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_GATHERING": "explicit",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_LOCAL_TEMP": str(private_dir / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(private_dir / "tmp"),
    }
    result = ansible_runner.run(
        private_data_dir=str(private_dir),
        project_dir=str(PLAYBOOKS),
        playbook=f"{name}.yml",
        inventory="localhost ansible_connection=local",
        extravars=extravars,
        envvars=envvars,
        quiet=True,
        forks=1,
        rotate_artifacts=4,
    )
    if result.status != "successful":
        tail = ""
        with contextlib.suppress(OSError, AttributeError, ValueError):
            tail = " | ".join(result.stdout.read().strip().splitlines()[-6:])
        raise InfrastructureError(f"playbook {name}.yml {result.status} (rc={result.rc}): {tail}")
