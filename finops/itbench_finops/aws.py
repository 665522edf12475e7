"""boto3 clients of the sandbox endpoint, per account."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from itbench_finops.server import ACCESS_KEY, MANAGEMENT_ACCOUNT, REGION, SECRET_KEY

_SESSION_LOCK = threading.Lock()
_SESSION: Any = None


def _shared_session() -> Any:
    """One boto3 session per process: its loader caches the service models across trials."""
    global _SESSION
    if _SESSION is None:
        import boto3  # type: ignore[import-untyped]

        _SESSION = boto3.session.Session()
    return _SESSION


@dataclass
class Credentials:
    """Access key of one account of the sandbox."""

    account_id: str
    access_key_id: str
    secret_access_key: str


@dataclass
class Clients:
    """Caches boto3 clients of one endpoint, one set per account.

    Args:
        endpoint: The endpoint URL.
        credentials: Access keys by account id (the main account's is added by default).
        harness_headers: Headers that let the harness pick an account by moto's account
            header (the endpoint honours that header for the harness only).
        by_header: Reach every account by the account header, never by its access key: the
            judge's view, which no change to the accounts' users and keys can redirect.
    """

    endpoint: str
    credentials: dict[str, Credentials] = field(default_factory=dict)
    harness_headers: dict[str, str] = field(default_factory=dict)
    by_header: bool = False
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.credentials.setdefault(
            MANAGEMENT_ACCOUNT, Credentials(MANAGEMENT_ACCOUNT, ACCESS_KEY, SECRET_KEY)
        )

    def client(self, service: str, account: str | None = None) -> Any:
        """A client of ``service`` acting as ``account`` (default: the main account).

        Accounts without an access key yet are reached through moto's account header (only
        used by the harness while seeding).
        """
        acct = account or MANAGEMENT_ACCOUNT
        key = (service, acct)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            from botocore.config import Config  # type: ignore[import-untyped]

            with _SESSION_LOCK:
                creds = None if self.by_header else self.credentials.get(acct)
                client = _shared_session().client(
                    service,
                    endpoint_url=self.endpoint,
                    region_name=REGION,
                    aws_access_key_id=creds.access_key_id if creds else ACCESS_KEY,
                    aws_secret_access_key=creds.secret_access_key if creds else SECRET_KEY,
                    config=Config(
                        retries={"max_attempts": 1},
                        connect_timeout=5,
                        read_timeout=60,
                        max_pool_connections=16,
                    ),
                )
            if creds is None:

                def _header(request: Any, **_: Any) -> None:
                    request.headers["x-moto-account-id"] = acct
                    for name, value in self.harness_headers.items():
                        request.headers[name] = value

                client.meta.events.register("before-send", _header)
            self._cache[key] = client
            return client

    def forget(self, account: str) -> None:
        """Drop cached clients of ``account`` (after its access key was created)."""
        with self._lock:
            for key in [k for k in self._cache if k[1] == account]:
                del self._cache[key]
