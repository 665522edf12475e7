"""The nightly report exporter: ``python -m itbench_sre.app.reports JOBFILE``.

Works on the shop database until stopped. It re-reads its job description (JSON) every half
second, keeps ``connections`` sessions open and every ``every_s`` seconds writes a sales report
from the first one.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any


def _connect(job: dict[str, Any]) -> Any:
    import pg8000.dbapi

    return pg8000.dbapi.connect(
        host="127.0.0.1",
        port=int(job["port"]),
        user=job["user"],
        password=job["password"],
        database=job["database"],
        application_name="reports",
        timeout=10,
    )


def _close(session: Any) -> None:
    with contextlib.suppress(Exception):
        session.close()


class Exporter:
    """The job's sessions."""

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self.last_report = 0.0

    def adjust(self, job: dict[str, Any]) -> None:
        """Open or close sessions as the job says."""
        want = max(1, int(job.get("connections", 1)))
        while len(self.sessions) > want:
            _close(self.sessions.pop())
        while len(self.sessions) < want:
            try:
                self.sessions.append(_connect(job))
            except Exception as exc:  # the database is busy: try again later
                print(f"cannot open session: {exc}", flush=True)
                break

    def report(self, job: dict[str, Any]) -> None:
        """Write one report when it is due."""
        if not self.sessions or time.monotonic() - self.last_report < float(job.get("every_s", 5)):
            return
        self.last_report = time.monotonic()
        cur = self.sessions[0].cursor()
        cur.execute("SELECT count(*), coalesce(sum(total_cents), 0) FROM orders")
        orders, revenue = cur.fetchone()
        self.sessions[0].commit()
        print(f"report: {orders} orders, {revenue} cents", flush=True)

    def reset(self) -> None:
        """Drop every session (after a database error)."""
        for session in self.sessions:
            _close(session)
        self.sessions.clear()


def main(argv: list[str] | None = None) -> None:
    """Run the job until killed."""
    args = argv if argv is not None else sys.argv[1:]
    path = Path(args[0])
    exporter = Exporter()
    job: dict[str, Any] = json.loads(path.read_text())
    while True:
        with contextlib.suppress(OSError, ValueError):
            job = json.loads(path.read_text())
        try:
            exporter.adjust(job)
            exporter.report(job)
        except Exception as exc:  # reconnect after the database went away
            print(f"report failed: {exc}", flush=True)
            exporter.reset()
            time.sleep(1)
        time.sleep(0.5)


if __name__ == "__main__":
    main()
