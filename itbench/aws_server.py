"""The AWS endpoint's server process: moto, with its admin API kept for the harness.

Run as ``python -m itbench.aws_server -H HOST -p PORT`` with the admin token in
:data:`TOKEN_ENV` (removed from the environment at start). moto's admin API (``/moto-api/``:
reset, state dumps, configuration) and its account header (any account, no credentials) answer
only requests carrying the token in :data:`ADMIN_HEADER`; everything else is moto unchanged.
Imported only in that subprocess, which runs in a domain distribution that depends on
``moto[server]``.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

#: The header that carries the admin token.
ADMIN_HEADER = "X-Itbench-Admin"
#: The environment variable the token is handed over in.
TOKEN_ENV = "ITBENCH_AWS_ADMIN_TOKEN"
#: Services whose moto backends the server imports before it serves (comma-separated).
PRELOAD_ENV = "ITBENCH_AWS_PRELOAD"
#: Start ready but unbound, until SIGUSR1 (see :func:`main`).
STANDBY_FLAG = "--standby"
#: ``module:function`` that creates accounts in the standby server before it binds (its
#: argument, JSON, is read from standard input).
SEED_ENV = "ITBENCH_AWS_SEED"

#: The path where the server proves it is the harness's: ``?nonce=N`` is answered with
#: :func:`identity_answer` under its token, which no other server on the port can compute.
IDENTITY_PATH = "/itbench-identity"

_ADMIN_KEY = "HTTP_" + ADMIN_HEADER.upper().replace("-", "_")
_ACCOUNT_KEY = "HTTP_X_MOTO_ACCOUNT_ID"


def identity_answer(token: str, nonce: str) -> str:
    """The answer of the server holding ``token`` to the challenge ``nonce``."""
    return hmac.new(token.encode(), f"identity:{nonce}".encode(), hashlib.sha256).hexdigest()


def guard(token: str) -> None:
    """Refuse moto's admin API and account header to requests without ``token``.

    Also answers the identity challenge at :data:`IDENTITY_PATH`.
    """
    from urllib.parse import parse_qs

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    def guarded(
        self: Any, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == IDENTITY_PATH:
            nonce = parse_qs(environ.get("QUERY_STRING", "")).get("nonce", [""])[0][:128]
            answer = identity_answer(token, nonce).encode()
            start_response(
                "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(answer)))]
            )
            return [answer]
        app = self.get_application(environ)
        harness = hmac.compare_digest(str(environ.get(_ADMIN_KEY, "")), token)
        if not harness and (app is self.app_instances.get("moto_api") or _ACCOUNT_KEY in environ):
            body = b"forbidden: the endpoint's admin API is the harness's own\n"
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        result: Iterable[bytes] = app(environ, start_response)
        return result

    DomainDispatcherApplication.__call__ = guarded  # type: ignore[method-assign]


def _seed(target: str) -> None:
    """Call ``module:function`` on the JSON of standard input, in moto's in-process mode.

    The function's boto3 calls reach this process's backends directly (no socket is bound
    yet), so the accounts it creates are what the server serves once activated.
    """
    from moto import mock_aws

    module, _, name = target.partition(":")
    payload = json.load(sys.stdin)
    # The payload is the harness's: nothing of it stays reachable through /proc/PID/fd/0.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    mock = mock_aws()
    mock.start(reset=False)
    try:
        getattr(importlib.import_module(module), name)(payload)
    finally:
        mock.stop(remove_data=False)


def main() -> None:
    """Start moto's server behind the guard.

    With ``--standby`` the process imports moto and the backends named in
    :data:`PRELOAD_ENV` (comma-separated services), creates the accounts of :data:`SEED_ENV`
    if set, then waits for SIGUSR1 before it binds its port: a server made ready while its
    predecessor still holds the port.
    """
    token = os.environ.pop(TOKEN_ENV, "")
    if not token:
        sys.exit(f"{TOKEN_ENV} is not set")
    argv = sys.argv[1:]
    standby = STANDBY_FLAG in argv
    if standby:
        argv.remove(STANDBY_FLAG)
        # Blocked (already by the harness at the start), so a signal sent early is kept.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    guard(token)
    from moto.server import main as moto_main

    for service in filter(None, os.environ.pop(PRELOAD_ENV, "").split(",")):
        importlib.import_module(f"moto.{service}.urls")
        importlib.import_module(f"moto.{service}.models")
    seed = os.environ.pop(SEED_ENV, "")
    if standby and seed:
        _seed(seed)
    if standby:
        signal.sigwait({signal.SIGUSR1})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    moto_main(argv)


if __name__ == "__main__":
    main()
