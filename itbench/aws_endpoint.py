"""An AWS endpoint owned by one trial: a moto server speaking the AWS wire protocol on 127.0.0.1.

Shared by the domains whose environments are AWS accounts. The core does not import moto: the
server runs as a subprocess of the domain's own distribution, which depends on ``moto[server]``.
"""

from __future__ import annotations

import hmac
import json
import secrets
import signal
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from itbench.aws_server import (
    ADMIN_HEADER,
    IDENTITY_PATH,
    PRELOAD_ENV,
    SEED_ENV,
    STANDBY_FLAG,
    TOKEN_ENV,
    identity_answer,
)
from itbench.errors import InfrastructureError
from itbench.process import ManagedProcess, wait_for_port

REGION = "us-east-1"
#: moto's default account and the access key pair that maps to it.
DEFAULT_ACCOUNT = "123456789012"
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class AwsEndpoint:
    """A moto server process owned by one trial.

    The class attributes are the endpoint's region, its default account and the key pair that
    maps to that account.

    Args:
        port: TCP port on 127.0.0.1 (from the trial's block).
        trial_dir: The trial's artifact directory (log and pid file).
        module: The Python module run as the server (``python -m MODULE -H HOST -p PORT``); by
            default :mod:`itbench.aws_server` (moto with its admin API kept for the harness); a
            domain that extends moto's API passes its own.
        name: The process's name (log and pid files).
        preload: Services whose moto backends the server imports before serving (the first
            call to a service otherwise pays for its import).
        standby: Launch ready but unbound: the port is bound only by :meth:`activate` (a
            replacement made ready while the current server still holds the port).
        seed: With ``standby``, ``("module:function", payload)``: the server calls the
            function on the payload (JSON) before it waits, with boto3 reaching its own
            backends in-process; accounts made while the current server still serves. The
            payload reaches it through an unlinked file, never a path or the environment.
    """

    REGION = REGION
    ACCOUNT = DEFAULT_ACCOUNT
    ACCESS_KEY = ACCESS_KEY
    SECRET_KEY = SECRET_KEY

    def __init__(
        self,
        port: int,
        trial_dir: Path,
        module: str = "itbench.aws_server",
        *,
        name: str = "aws-endpoint",
        preload: tuple[str, ...] = (),
        standby: bool = False,
        seed: tuple[str, Any] | None = None,
    ) -> None:
        if seed is not None and not standby:
            raise ValueError("seed needs standby")
        self.port = port
        self.standby = standby
        self._seed = seed
        self.trial_dir = trial_dir
        self._token = secrets.token_hex(16)
        argv = [sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)]
        self.process = ManagedProcess(
            name,
            [*argv, STANDBY_FLAG] if standby else argv,
            trial_dir,
            # Keep the server from reading a developer's AWS config or making outbound calls.
            env={
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION,
                "MOTO_ALLOW_NONEXISTENT_REGION": "false",
                "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
                "PYTHONDONTWRITEBYTECODE": "1",
                TOKEN_ENV: self._token,
                PRELOAD_ENV: ",".join(preload),
                SEED_ENV: seed[0] if seed else "",
            },
        )

    @property
    def url(self) -> str:
        """Endpoint URL of every AWS service."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until its port is open."""
        self.launch()
        self.wait(timeout)

    def launch(self) -> None:
        """Start the server process without waiting for it (to overlap its start with work)."""
        # A standby server takes SIGUSR1 only when ready: blocked from its first instruction.
        blocked = (signal.SIGUSR1,) if self.standby else ()
        if self._seed is None:
            self.process.start(blocked=blocked)
            return
        with tempfile.TemporaryFile() as payload:
            payload.write(json.dumps(self._seed[1]).encode())
            payload.seek(0)
            self.process.start(stdin=payload, blocked=blocked)

    def wait(self, timeout: float = 30.0) -> None:
        """Wait until the server accepts connections.

        Raises:
            InfrastructureError: it exited or did not open its port in time.
        """
        try:
            wait_for_port(self.port, timeout, proc=self.process.proc)
        except InfrastructureError as exc:
            self.stop()
            raise InfrastructureError(
                f"AWS endpoint on port {self.port}: {exc}; log: {self.process.log_tail()}"
            ) from None

    def activate(self, timeout: float = 30.0) -> None:
        """Let a server launched with ``standby=True`` bind its port, and wait until it listens.

        Raises:
            InfrastructureError: it is not running, or did not open its port in time.
        """
        proc = self.process.proc
        if proc is None or proc.poll() is not None:
            raise InfrastructureError(
                f"the standby AWS endpoint for port {self.port} is not running; "
                f"log: {self.process.log_tail()}"
            )
        proc.send_signal(signal.SIGUSR1)
        self.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (idempotent); SIGKILL if it lingers past ``timeout``."""
        self.process.stop(timeout=timeout)

    def alive(self) -> bool:
        """Whether the server process runs."""
        return self.process.alive()

    def identity_problems(self, timeout: float = 10.0) -> list[str]:
        """Why the port is not answered by this server (a fresh challenge), or nothing.

        Args:
            timeout: Seconds to wait for the answer (a stopped server never answers).
        """
        nonce = secrets.token_hex(16)
        try:
            with urllib.request.urlopen(  # local URL
                self._identity_request(nonce), timeout=timeout
            ) as resp:
                answer = bytes(resp.read(256)).strip()
        except urllib.error.HTTPError as exc:
            answer = f"HTTP {exc.code}".encode()
        except (urllib.error.URLError, OSError) as exc:
            return [f"the AWS endpoint on port {self.port} does not answer: {exc}"]
        except Exception as exc:  # whatever holds the port may answer anything
            return [f"port {self.port} answers the identity challenge with garbage: {exc!r}"]
        if not hmac.compare_digest(answer, self._identity_answer(nonce).encode()):
            return [f"port {self.port} is answered by another server than the trial's endpoint"]
        return []

    def _identity_request(self, nonce: str) -> urllib.request.Request:
        """The challenge's request (a server module of a domain may have its own)."""
        return urllib.request.Request(f"{self.url}{IDENTITY_PATH}?nonce={nonce}")

    def _identity_answer(self, nonce: str) -> str:
        """The answer only this server can give to ``nonce``."""
        return identity_answer(self._token, nonce)

    def admin(self, path: str, body: Any | None = None, method: str = "POST") -> bytes:
        """Call one of moto's ``/moto-api/`` endpoints.

        Raises:
            InfrastructureError: the call failed.
        """
        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(
            f"{self.url}/moto-api/{path}",
            data=data if method != "GET" else None,
            method=method,
            headers={"Content-Type": "application/json", ADMIN_HEADER: self._token},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # local URL
                return bytes(resp.read())
        except (urllib.error.URLError, OSError) as exc:
            raise InfrastructureError(f"moto admin call {path} failed: {exc}") from exc

    def reset(self) -> None:
        """Forget every account's resources.

        Raises:
            InfrastructureError: the reset call failed.
        """
        self.admin("reset")
