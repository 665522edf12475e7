"""Entry point of the environment's AWS endpoint: moto's server, warmed up before it listens.

The first request to each moto service loads its models and builds its backend. Doing that
once before the port opens (and resetting the state afterwards) makes "port open" mean
"ready", and keeps the seeding step fast.

moto's own admin API (``/moto-api/``: reset, state dump, preloaded results) is for the harness
only: it answers just requests carrying the token derived from the key the harness handed the
endpoint (:mod:`itbench_finops.admin`), so an agent on the same port cannot wipe the account
or rewrite what Cost Explorer returns.
"""

from __future__ import annotations

import hmac
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

#: One cheap read-only call per service the environments use.
WARMUP: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ec2", "describe_instances", {}),
    ("elbv2", "describe_load_balancers", {}),
    ("rds", "describe_db_instances", {}),
    ("s3", "list_buckets", {}),
    ("autoscaling", "describe_auto_scaling_groups", {}),
    ("cloudwatch", "list_metrics", {}),
    ("budgets", "describe_budgets", {"AccountId": "123456789012"}),
    ("iam", "list_users", {}),
    ("sts", "get_caller_identity", {}),
)


def cache_region_lists() -> None:
    """Answer ``Session.get_available_regions`` from a cache.

    moto asks fresh boto3 sessions for the region lists of each service in every partition
    while it loads; each ask parses the service's whole model again (megabytes for EC2) just
    to read its endpoint prefix. The answers never change in one process, so each service's
    prefix is read once and each list resolved once, the way botocore resolves it.
    """
    import boto3.session  # type: ignore[import-untyped]
    from botocore.exceptions import UnknownServiceError  # type: ignore[import-untyped]

    cache: dict[tuple[str, str, bool], list[str]] = {}
    prefixes: dict[str, str | None] = {}

    def cached(
        self: Any, service_name: str, partition_name: str = "aws", allow_non_regional: bool = False
    ) -> list[str]:
        key = (service_name, partition_name, allow_non_regional)
        if key not in cache:
            core = self._session
            if service_name not in prefixes:
                try:
                    meta = core.get_service_data(service_name)["metadata"]
                    prefixes[service_name] = meta.get("endpointPrefix", service_name)
                except UnknownServiceError:
                    prefixes[service_name] = None
            prefix = prefixes[service_name]
            resolver = core._get_internal_component("endpoint_resolver")
            cache[key] = (
                resolver.get_available_endpoints(prefix, partition_name, allow_non_regional)
                if prefix is not None
                else []
            )
        return list(cache[key])

    boto3.session.Session.get_available_regions = cached

    # Every fresh session also parses botocore's endpoint data again (over a megabyte of
    # JSON); that data is read-only, so one parsed copy serves them all.
    from botocore.loaders import JSONFileLoader  # type: ignore[import-untyped]

    load_file = JSONFileLoader.load_file
    parsed: dict[str, Any] = {}

    def cached_load(self: Any, file_path: str) -> Any:
        if not file_path.endswith(("endpoints", "partitions")):
            return load_file(self, file_path)
        if file_path not in parsed:
            parsed[file_path] = load_file(self, file_path)
        return parsed[file_path]

    JSONFileLoader.load_file = cached_load


def warm_up() -> None:
    """Exercise every service once in-process, then drop all state."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        session = boto3.session.Session(
            aws_access_key_id="warmup", aws_secret_access_key="warmup", region_name="us-east-1"
        )
        for service, operation, params in WARMUP:
            getattr(session.client(service), operation)(**params)
    # Leaving mock_aws resets every backend: the server starts from an empty account.


def _plain(start_response: Any, status: str, body: bytes) -> Iterable[bytes]:
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def guard_admin_api(key: bytes) -> None:
    """Let only holders of the admin token of ``key`` reach moto's admin API.

    Also answers the harness's identity challenge at
    :data:`~itbench_finops.admin.IDENTITY_PATH`. Routing is decided the way moto decides it
    (whatever reaches moto's admin application is guarded), not by a path prefix of our own.
    """
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    from itbench_finops.admin import ADMIN_HEADER, IDENTITY_PATH, admin_token, identity_answer

    token = admin_token(key)
    environ_key = "HTTP_" + ADMIN_HEADER.upper().replace("-", "_")

    def guarded(
        self: DomainDispatcherApplication,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes]:
        app = self.get_application(environ)
        if app is not self.app_instances.get("moto_api"):
            return app(environ, start_response)
        if not hmac.compare_digest(str(environ.get(environ_key, "")), token):
            return _plain(start_response, "403 Forbidden", b"forbidden")
        if environ.get("PATH_INFO") == IDENTITY_PATH:
            query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")))
            nonce = query.get("nonce", [""])[0]
            return _plain(start_response, "200 OK", identity_answer(key, nonce).encode())
        return app(environ, start_response)

    DomainDispatcherApplication.__call__ = guarded  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    """Warm up, then run ``moto.server`` with ``argv``.

    Raises:
        SystemExit: the harness handed over no key (the admin API would be open).
    """
    from itbench_finops.admin import KEY_VARIABLE

    key_hex = os.environ.pop(KEY_VARIABLE, "")
    if not key_hex:
        raise SystemExit(
            f"{KEY_VARIABLE} is not set: the endpoint will not serve an open admin API"
        )
    cache_region_lists()
    import moto.server

    # moto answers SIGTERM with sys.exit, and the interpreter's orderly shutdown of moto's
    # module graph takes about a second; the account lives in memory only, so exit at once.
    moto.server.signal_handler = _exit_now
    from itbench_finops.budget_api import install

    install()
    guard_admin_api(bytes.fromhex(key_hex))
    warm_up()
    moto.server.main(argv if argv is not None else sys.argv[1:])


def _exit_now(signum: int, frame: Any) -> None:
    """Flush the log streams and end the process without interpreter teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
