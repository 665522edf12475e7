"""Entry point of the environment's AWS endpoint: moto's server, warmed up before it listens.

The first request to each moto service loads its models and builds its backend. Doing that
once before the port opens (and resetting the state afterwards) makes "port open" mean
"ready", and keeps the seeding step fast.
"""

from __future__ import annotations

import os
import sys
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


def main(argv: list[str] | None = None) -> None:
    """Warm up, then run ``moto.server`` with ``argv``."""
    cache_region_lists()
    import moto.server

    # moto answers SIGTERM with sys.exit, and the interpreter's orderly shutdown of moto's
    # module graph takes about a second; the account lives in memory only, so exit at once.
    moto.server.signal_handler = _exit_now
    from itbench_finops.budget_api import install

    install()
    warm_up()
    moto.server.main(argv if argv is not None else sys.argv[1:])


def _exit_now(signum: int, frame: Any) -> None:
    """Flush the log streams and end the process without interpreter teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
