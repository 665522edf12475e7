"""A moto server owned by one trial, and per-account clients through STS role assumption."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from itbench.domain import InfrastructureError
from itbench.process import ManagedProcess, wait_for_port

REGION = "us-east-1"
#: moto's default account and the access key that maps to it.
DEFAULT_ACCOUNT = "123456789012"
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@dataclass(frozen=True)
class Credentials:
    """Keys of one sandbox account."""

    account_id: str
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def env(self, endpoint: str) -> dict[str, str]:
        """Environment variables that point boto3 and the AWS CLI at the endpoint."""
        out = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }
        if self.session_token:
            out["AWS_SESSION_TOKEN"] = self.session_token
        return out


DEFAULT_CREDENTIALS = Credentials(DEFAULT_ACCOUNT, ACCESS_KEY, SECRET_KEY)


@cache
def _session() -> Any:
    import boto3  # type: ignore[import-untyped]

    return boto3.session.Session()


class MotoServer:
    """``moto.server`` on 127.0.0.1, started and stopped by the trial.

    Args:
        port: TCP port from the trial's block.
        trial_dir: Where the log and pid file go.
    """

    def __init__(self, port: int, trial_dir: Path) -> None:
        self.port = port
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}
        self.process = ManagedProcess(
            "aws-endpoint",
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            trial_dir,
            env={
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION,
                "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
                "PYTHONDONTWRITEBYTECODE": "1",
            },
        )

    @property
    def url(self) -> str:
        """The endpoint URL of every service."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait for the port."""
        self.process.start()
        try:
            wait_for_port(self.port, timeout, proc=self.process.proc)
        except InfrastructureError as exc:
            self.stop()
            raise InfrastructureError(
                f"AWS endpoint: {exc}; log: {self.process.log_tail()}"
            ) from None

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self.process.stop(timeout=1.0)

    def alive(self) -> bool:
        """Whether the server runs."""
        return self.process.alive()

    def reset(self) -> None:
        """Forget every account's resources.

        Raises:
            InfrastructureError: the reset call failed.
        """
        req = urllib.request.Request(f"{self.url}/moto-api/reset", data=b"", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - local URL
                json.loads(resp.read() or b"{}")
        except (OSError, ValueError) as exc:
            raise InfrastructureError(f"resetting the AWS endpoint failed: {exc}") from exc

    def client(self, service: str, creds: Credentials = DEFAULT_CREDENTIALS) -> Any:
        """A boto3 client of ``service`` for the account of ``creds`` (cached; thread safe)."""
        key = (service, creds.access_key_id)
        with self._lock:
            cached = self._clients.get(key)
            if cached is not None:
                return cached
            made = self._clients[key] = self._make(service, creds)
            return made

    def _make(self, service: str, creds: Credentials) -> Any:
        return _session().client(
            service,
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=creds.access_key_id,
            aws_secret_access_key=creds.secret_access_key,
            aws_session_token=creds.session_token,
        )

    def account(self, account_id: str) -> Credentials:
        """Credentials of ``account_id`` (moto maps assumed-role keys to the role's account)."""
        if account_id == DEFAULT_ACCOUNT:
            return DEFAULT_CREDENTIALS
        sts = self.client("sts")
        creds = sts.assume_role(
            RoleArn=f"arn:aws:iam::{account_id}:role/compliance-audit",
            RoleSessionName="itbench",
        )["Credentials"]
        return Credentials(
            account_id, creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]
        )
