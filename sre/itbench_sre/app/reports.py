"""The nightly report exporter: ``python -m itbench_sre.app.reports JOBFILE``.

Reads its job description (JSON) and works on the shop database until stopped. ``connections``
sessions are opened and kept; with ``lock_table`` one of them holds a table lock while the
report is "being written".
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> None:
    """Run the job until killed."""
    import pg8000.dbapi

    args = argv if argv is not None else sys.argv[1:]
    job: dict[str, Any] = json.loads(Path(args[0]).read_text())
    sessions: list[Any] = []
    want = int(job.get("connections", 1))
    table = job.get("lock_table")
    locked = False
    while True:
        if len(sessions) < want:
            try:
                sessions.append(
                    pg8000.dbapi.connect(
                        host="127.0.0.1",
                        port=int(job["port"]),
                        user=job["user"],
                        password=job["password"],
                        database=job["database"],
                        application_name="reports",
                    )
                )
                continue
            except Exception as exc:  # noqa: BLE001 - the database is busy: try again later
                print(f"cannot open session: {exc}", flush=True)
        if table and sessions and not locked:
            sessions[0].cursor().execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            locked = True
            print(f"writing report from {table}", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
