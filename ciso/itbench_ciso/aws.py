"""A moto server owned by one trial, and per-account clients through STS role assumption."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from itbench import AwsEndpoint as _MotoServer

REGION = _MotoServer.REGION
DEFAULT_ACCOUNT = _MotoServer.ACCOUNT
ACCESS_KEY = _MotoServer.ACCESS_KEY
SECRET_KEY = _MotoServer.SECRET_KEY

__all__ = ["DEFAULT_ACCOUNT", "DEFAULT_CREDENTIALS", "REGION", "Credentials", "MotoServer"]


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


class MotoServer(_MotoServer):
    """The core's moto server with cached per-account boto3 clients.

    Args:
        port: TCP port from the trial's block.
        trial_dir: Where the log and pid file go.
        **options: The core endpoint's keyword options (``name``, ``preload``, ``standby``).
    """

    def __init__(self, port: int, trial_dir: Path, **options: Any) -> None:
        super().__init__(port, trial_dir, **options)
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str, str], Any] = {}

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the server (idempotent)."""
        super().stop(timeout)
        with self._lock:
            self._clients.clear()

    def client(
        self,
        service: str,
        creds: Credentials = DEFAULT_CREDENTIALS,
        region: str = REGION,
    ) -> Any:
        """A boto3 client of ``service`` for the account of ``creds`` in ``region`` (cached)."""
        key = (service, creds.access_key_id, region)
        with self._lock:
            cached = self._clients.get(key)
            if cached is not None:
                return cached
            made = self._clients[key] = self._make(service, creds, region)
            return made

    def _make(self, service: str, creds: Credentials, region: str = REGION) -> Any:
        return _session().client(
            service,
            endpoint_url=self.url,
            region_name=region,
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
