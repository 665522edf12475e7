"""The AWS endpoint of one FinOps environment: the core's moto server running our endpoint.

The endpoint holds a key of its own (handed over in its environment, never shown to the
agent). moto's ``/moto-api/`` (reset, state dump, preloaded results) answers only requests
that carry a token derived from it, and the endpoint proves it is the trial's own server by
answering a random challenge with an HMAC under the key: a server that took over the port
cannot.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from itbench import AwsEndpoint as _MotoServer
from itbench import InfrastructureError
from itbench_finops.admin import (
    ACCOUNTS_VARIABLE,
    ADMIN_HEADER,
    IDENTITY_PATH,
    KEY_VARIABLE,
    admin_token,
    identity_answer,
)

__all__ = ["ACCESS_KEY", "MANAGEMENT_ACCOUNT", "REGION", "SECRET_KEY", "MotoServer"]

REGION = _MotoServer.REGION
MANAGEMENT_ACCOUNT = _MotoServer.ACCOUNT
ACCESS_KEY = _MotoServer.ACCESS_KEY
SECRET_KEY = _MotoServer.SECRET_KEY

#: Seconds the identity check waits for an answer (a stopped server never answers).
IDENTITY_TIMEOUT = 10.0
EXIT_GRACE_S = 2.0


class MotoServer(_MotoServer):
    """moto plus the Budgets operations of :mod:`itbench_finops.endpoint`, with a guarded admin API.

    Args:
        port: TCP port on 127.0.0.1 (from the trial's block).
        trial_dir: The trial's artifact directory (log and pid file).
        accounts: Member account ids the endpoint serves besides the management account.
    """

    def __init__(self, port: int, trial_dir: Path, accounts: list[str] | None = None) -> None:
        super().__init__(port, trial_dir, module="itbench_finops.endpoint")
        self._key = secrets.token_bytes(32)
        self.process.env[KEY_VARIABLE] = self._key.hex()
        self.process.env[ACCOUNTS_VARIABLE] = ",".join(accounts or [])
        self._pid: int | None = None

    @property
    def admin_headers(self) -> dict[str, str]:
        """Headers that mark a request as the harness's (for moto's account header)."""
        return {ADMIN_HEADER: admin_token(self._key)}

    def launch(self) -> None:
        """Start the server process and remember which process it is."""
        super().launch()
        proc = self.process.proc
        self._pid = proc.pid if proc is not None else None

    def admin(self, path: str, body: Any | None = None, method: str = "POST") -> bytes:
        """Call one of moto's ``/moto-api/`` endpoints with the admin token.

        Raises:
            InfrastructureError: the call failed.
        """
        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(
            f"{self.url}/moto-api/{path}",
            data=data if method != "GET" else None,
            method=method,
            headers={"Content-Type": "application/json", ADMIN_HEADER: admin_token(self._key)},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # local URL
                return bytes(resp.read())
        except (urllib.error.URLError, OSError) as exc:
            raise InfrastructureError(f"moto admin call {path} failed: {exc}") from exc

    def problems(self, timeout: float = IDENTITY_TIMEOUT) -> list[str]:
        """Why the server is not the one :meth:`launch` started, alive and answering, or nothing.

        Args:
            timeout: Seconds to wait for the identity answer.
        """
        proc = self.process.proc
        if proc is None or self._pid is None:
            return ["the AWS endpoint was never started"]
        if proc.pid != self._pid:
            return [f"the AWS endpoint's process changed from pid {self._pid} to {proc.pid}"]
        code = proc.poll()
        if code is None:
            found = self.identity_problems(timeout)
            if not found:
                return []
            # A killed multi-threaded server closes its socket before the kernel lets it be
            # reaped: give a dying process a moment, so its death is named, not its silence.
            try:
                code = proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                return found
        return [f"the AWS endpoint (pid {self._pid}) exited with status {code}"]

    def _identity_request(self, nonce: str) -> urllib.request.Request:
        return urllib.request.Request(
            f"{self.url}{IDENTITY_PATH}?{urllib.parse.urlencode({'nonce': nonce})}",
            headers={ADMIN_HEADER: admin_token(self._key)},
        )

    def _identity_answer(self, nonce: str) -> str:
        return identity_answer(self._key, nonce)
