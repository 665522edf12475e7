"""The endpoint's admin key: the token that opens moto's admin API and the identity challenge.

Shared by the harness side (:mod:`itbench_finops.server`) and the endpoint process
(:mod:`itbench_finops.endpoint`); imports nothing else of the project, to keep the endpoint's
start short.
"""

from __future__ import annotations

import hashlib
import hmac

#: Environment variable that hands the endpoint its key.
KEY_VARIABLE = "ENDPOINT_KEY"
#: Environment variable that hands the endpoint the member account ids (comma-separated).
ACCOUNTS_VARIABLE = "ENDPOINT_ACCOUNTS"
#: Request header that carries the admin token.
ADMIN_HEADER = "X-Endpoint-Admin"
#: Path of the identity challenge (``?nonce=...``), behind the admin token like ``/moto-api/``.
IDENTITY_PATH = "/moto-api/identity"


def admin_token(key: bytes) -> str:
    """The admin token of ``key``; a server that sees it still cannot answer a challenge."""
    return hmac.new(key, b"admin", hashlib.sha256).hexdigest()


def identity_answer(key: bytes, nonce: str) -> str:
    """The answer of the server holding ``key`` to the challenge ``nonce``."""
    return hmac.new(key, f"identity:{nonce}".encode(), hashlib.sha256).hexdigest()
