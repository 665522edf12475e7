"""Entry point of the environment's AWS endpoint: moto's server, warmed up before it listens.

The first request to each moto service loads its models and builds its backend. Doing that
once before the port opens (and resetting the state afterwards) makes "port open" mean
"ready", and keeps the seeding step fast.

moto's own admin API (``/moto-api/``: reset, state dump) and the harness API under
``/moto-api/harness/`` (dating the seeded resources, the billing data Cost Explorer answers
from: :mod:`itbench_finops.harness_api`) are for the harness only: they answer just requests
carrying the token derived from the key the harness handed the endpoint
(:mod:`itbench_finops.admin`), so an agent on the same port cannot wipe the account or rewrite
its history or its costs.

Besides moto's services, the endpoint answers Cost Explorer from the account's billing rows
(:func:`install_cost_explorer`, :mod:`itbench_finops.cost_explorer`) and the Price List API
from the price table (:mod:`itbench_finops.pricing_api`), which moto does not emulate.

The endpoint is the task's accounts in one region, and nothing else (:func:`guard_requests`):
moto would serve any region, any account (through its account header or credentials of a
role assumed in another account) and every service it emulates, and the judge reads only the
task's accounts in the task's region. Requests elsewhere are refused with an AWS-style error,
as are requests that would start more instances at once than an account's quota allows.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import date
from typing import Any
from xml.sax.saxutils import escape

#: moto's default account: the management account of every environment.
DEFAULT_ACCOUNT = "123456789012"

#: One cheap read-only call per service the environments use.
WARMUP: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ec2", "describe_instances", {}),
    ("elbv2", "describe_load_balancers", {}),
    ("elb", "describe_load_balancers", {}),
    ("rds", "describe_db_instances", {}),
    ("s3", "list_buckets", {}),
    ("autoscaling", "describe_auto_scaling_groups", {}),
    ("cloudwatch", "list_metrics", {}),
    ("budgets", "describe_budgets", {"AccountId": "123456789012"}),
    ("iam", "list_users", {}),
    ("logs", "describe_log_groups", {}),
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


def _json(start_response: Any, status: str, body: bytes) -> Iterable[bytes]:
    start_response(
        status,
        [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(body)))],
    )
    return [body]


#: Most bytes of a request body the endpoint's own handlers read.
MAX_BODY = 64 * 2**20


def _body(environ: dict[str, Any]) -> bytes:
    try:
        length = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_BODY)
    except ValueError:
        length = 0
    return bytes(environ["wsgi.input"].read(length)) if length > 0 else b""


def _signed_region(environ: dict[str, Any]) -> str | None:
    """The region of a request's signature scope, or None when it is not signed (SigV4)."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    marker = "Credential="
    if marker not in auth:
        return None
    scope = auth.split(marker, 1)[1].split(",", 1)[0].split("/")
    return scope[2] if len(scope) > 2 else None


#: Path prefix of the harness's own calls (:mod:`itbench_finops.harness_api`).
HARNESS_PATH = "/moto-api/harness/"


def install_cost_explorer() -> None:
    """Answer Cost Explorer's queries from the billing data the harness sent.

    Replaces moto's ``GetCostAndUsage`` (one preloaded result per request) and adds the
    operations moto lacks; each goes through moto's authorization (and the guard's) as any
    other action, and sees the rows of the calling account (all of them for the payer).
    """
    from moto.ce.responses import CostExplorerResponse
    from moto.core.exceptions import JsonRESTError

    from itbench_finops import cost_explorer as ce
    from itbench_finops.harness_api import BILLING

    def answer(handler: Any, operation: str) -> str:
        try:
            params = json.loads(handler.body or "{}")
            if not isinstance(params, dict):
                raise ce.CostExplorerError("the request body must be a JSON object")
            rows, account, payer = BILLING["rows"], handler.current_account, BILLING["payer"]
            if operation == "forecast":
                today = date.fromisoformat(BILLING["end"]) if BILLING["end"] else date.today()
                result = ce.get_cost_forecast(params, rows, account, payer, today)
            elif operation == "resources":
                result = ce.get_cost_and_usage(params, rows, account, payer, resources=True)
            else:
                result = getattr(ce, operation)(params, rows, account, payer)
        except json.JSONDecodeError:
            raise JsonRESTError("SerializationException", "the request body is not JSON") from None
        except ce.CostExplorerError as exc:
            raise JsonRESTError(exc.code, str(exc)) from None
        return json.dumps(result)

    methods = {
        "get_cost_and_usage": "get_cost_and_usage",
        "get_cost_and_usage_with_resources": "resources",
        "get_dimension_values": "get_dimension_values",
        "get_tags": "get_tags",
        "get_cost_forecast": "forecast",
    }
    for method, operation in methods.items():

        def bound(self: Any, operation: str = operation) -> str:
            return answer(self, operation)

        setattr(CostExplorerResponse, method, bound)


#: The region the endpoint serves.
REGION = "us-east-1"
#: moto backends the endpoint serves: the tasks' services and the ones agents look around with.
SERVICES = frozenset(
    {
        "autoscaling",
        "budgets",
        "ce",
        "cloudtrail",
        "cloudwatch",
        "ec2",
        "elb",
        "elbv2",
        "iam",
        "logs",
        "organizations",
        "rds",
        "resourcegroupstaggingapi",
        "s3",
        "sts",
    }
)
#: Most instances one request may start or size a group to (an account's instance quota).
MAX_INSTANCES_PER_REQUEST = 100
#: Parameters that count instances, by action.
_COUNTED = {
    "RunInstances": ("MinCount", "MaxCount"),
    "CreateAutoScalingGroup": ("MinSize", "DesiredCapacity"),
    "UpdateAutoScalingGroup": ("MinSize", "DesiredCapacity"),
    "SetDesiredCapacity": ("DesiredCapacity",),
}
#: moto's request header that picks the account (for the harness only).
ACCOUNT_HEADER = "x-moto-account-id"


def error_body(json_protocol: bool, code: str, message: str) -> str:
    """An AWS error document: JSON for the JSON protocols, the query protocols' XML otherwise."""
    if json_protocol:
        return json.dumps({"__type": code, "message": message})
    return (
        "<ErrorResponse><Errors><Error><Type>Sender</Type>"
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        "</Error></Errors><RequestId>refused</RequestId></ErrorResponse>"
    )


def refusal(handler: Any, accounts: frozenset[str]) -> tuple[int, str, str] | None:
    """Why the endpoint refuses the request a moto handler has set up, or None.

    Args:
        handler: moto's response handler, after its ``setup_class`` (region, account known).
        accounts: The account ids the endpoint serves.

    Returns:
        The HTTP status, error code and message of the refusal.
    """
    if handler.region != REGION:
        return (
            400,
            "UnsupportedRegion",
            f"this account is served in {REGION} only, not in {str(handler.region)[:40]!r}",
        )
    if handler.current_account not in accounts:
        return (
            403,
            "AccessDenied",
            "these credentials belong to an account outside this environment: use the "
            "accounts of the task context",
        )
    try:
        action = str(handler._get_action() or "")
        counts = [handler._get_int_param(p) for p in _COUNTED.get(action, ())]
    except (TypeError, ValueError, KeyError, AttributeError):
        return None  # moto answers malformed parameters itself
    too_many = [c for c in counts if isinstance(c, int) and c > MAX_INSTANCES_PER_REQUEST]
    if too_many:
        return (
            400,
            "InstanceLimitExceeded",
            f"{action} asks for {max(too_many)} instances; the account's quota allows "
            f"{MAX_INSTANCES_PER_REQUEST} per request",
        )
    return None


def guard_requests(key: bytes, accounts: Iterable[str]) -> None:
    """Serve only the harness's admin API, and the task's accounts, region and services.

    The admin API (``/moto-api/``) and the harness's identity challenge at
    :data:`~itbench_finops.admin.IDENTITY_PATH` answer only the admin token of ``key``.
    Routing is decided the way moto decides it: whatever reaches moto's admin application is
    guarded, and a service moto would route to outside :data:`SERVICES` is refused. moto's
    account header is the harness's alone (it seeds member accounts through it).

    Region and account are checked where moto authorizes each action, after moto itself has
    resolved them (from the host, the user agent or the signature's scope; from the access
    key, which may be a role's assumed in another account), so no spelling of a request gets
    around the check. Requests carrying the admin token pass.

    Args:
        key: The endpoint's key.
        accounts: The account ids the endpoint serves.
    """
    from moto.core.responses import BaseResponse
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.s3.exceptions import S3ClientError
    from werkzeug.exceptions import HTTPException

    from itbench_finops import harness_api, pricing_api
    from itbench_finops.admin import ADMIN_HEADER, IDENTITY_PATH, admin_token, identity_answer

    token = admin_token(key)
    served = frozenset(accounts)
    environ_key = "HTTP_" + ADMIN_HEADER.upper().replace("-", "_")
    account_key = "HTTP_" + ACCOUNT_HEADER.upper().replace("-", "_")

    def guarded(
        self: DomainDispatcherApplication,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes]:
        admin = hmac.compare_digest(str(environ.get(environ_key, "")), token)
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith(pricing_api.TARGET):
            region = _signed_region(environ)
            if region not in (None, REGION):
                body = error_body(
                    True, "UnsupportedRegion", f"the Price List API is served in {REGION} only"
                ).encode()
                return _json(start_response, "400 Bad Request", body)
            return _json(start_response, *pricing_api.answer(target, _body(environ)))
        app = self.get_application(environ)
        if app is not self.app_instances.get("moto_api"):
            if admin:
                return app(environ, start_response)
            backend = next((k for k, v in self.app_instances.items() if v is app), None)
            if account_key in environ:
                why = (
                    "403 Forbidden",
                    "AccessDenied",
                    f"the {ACCOUNT_HEADER} header is not accepted: use the credentials of the "
                    "task context's accounts",
                )
            elif backend not in SERVICES:
                why = (
                    "400 Bad Request",
                    "UnsupportedService",
                    f"this environment does not offer the {backend} service",
                )
            else:
                return app(environ, start_response)
            body = error_body("HTTP_X_AMZ_TARGET" in environ, why[1], why[2]).encode()
            start_response(why[0], [("Content-Length", str(len(body)))])
            return [body]
        if not admin:
            return _plain(start_response, "403 Forbidden", b"forbidden")
        path = str(environ.get("PATH_INFO", ""))
        if path == IDENTITY_PATH:
            query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")))
            nonce = query.get("nonce", [""])[0]
            return _plain(start_response, "200 OK", identity_answer(key, nonce).encode())
        if path.startswith(HARNESS_PATH):
            status, body = harness_api.handle(path[len(HARNESS_PATH) :], _body(environ))
            return _json(start_response, status, body)
        return app(environ, start_response)

    DomainDispatcherApplication.__call__ = guarded  # type: ignore[method-assign]

    class Refused(HTTPException):
        """A refusal, as moto's authorization step returns it (the body is the document)."""

        def __init__(self, status: int, body: str) -> None:
            super().__init__(description=body)
            self.code = status

    def harness(handler: Any) -> bool:
        return hmac.compare_digest(str(handler.headers.get(ADMIN_HEADER, "")), token)

    normal = BaseResponse._authenticate_and_authorize_normal_action
    s3 = BaseResponse._authenticate_and_authorize_s3_action

    def checked_normal(handler: Any, resource: str = "*") -> None:
        why = None if harness(handler) else refusal(handler, served)
        if why is not None:
            status, code, message = why
            json_protocol = bool(handler.headers.get("X-Amz-Target")) or "json" in str(
                handler.headers.get("Content-Type", "")
            )
            raise Refused(status, error_body(json_protocol, code, message))
        normal(handler, resource)

    def checked_s3(
        handler: Any, bucket_name: str | None = None, key_name: str | None = None
    ) -> None:
        why = None if harness(handler) else refusal(handler, served)
        if why is not None:
            raise S3ClientError(why[1], why[2])
        s3(handler, bucket_name=bucket_name, key_name=key_name)

    BaseResponse._authenticate_and_authorize_normal_action = checked_normal  # type: ignore[method-assign,assignment]
    BaseResponse._authenticate_and_authorize_s3_action = checked_s3  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> None:
    """Warm up, then run ``moto.server`` with ``argv``.

    Raises:
        SystemExit: the harness handed over no key (the admin API would be open).
    """
    from itbench_finops.admin import ACCOUNTS_VARIABLE, KEY_VARIABLE

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
    install_cost_explorer()
    warm_up()
    accounts = [a for a in os.environ.pop(ACCOUNTS_VARIABLE, "").split(",") if a]
    guard_requests(bytes.fromhex(key_hex), [DEFAULT_ACCOUNT, *accounts])
    moto.server.main(argv if argv is not None else sys.argv[1:])


def _exit_now(signum: int, frame: Any) -> None:
    """Flush the log streams and end the process without interpreter teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
