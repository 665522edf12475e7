"""The chain over a run's ``results.jsonl``: each line is bound to the ones before it.

Every results line carries ``chain``, an HMAC-SHA256 keyed by the run's chain key (derived from
the run's secret) over the previous line's ``chain`` and the line's own fields in canonical
JSON. The first line chains from the run's manifest. So a line whose status, scores or any
other field was edited, a line removed, inserted, reordered or copied from another run, or a
manifest edited (its labels, sandbox, code hashes), no longer verifies, and the error names the
first line that does not.

The chain key is derived from the secret, never the secret itself: a leaderboard entry publishes
the key so the board can check its lines without revealing the draws the secret seeded. Whoever
holds the key can forge a chain; what a submitter holds is checked by re-running trials
(``itbench leaderboard verify``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

#: The field of a results line that holds its link.
FIELD = "chain"
_LABEL = b"itbench results chain v1"


def chain_key(secret: bytes) -> bytes:
    """The run's chain key, derived from its secret."""
    return hmac.new(secret, _LABEL, hashlib.sha256).digest()


def start(key: bytes, manifest: dict[str, Any]) -> str:
    """The link the first line chains from: the run's manifest, so editing it breaks the chain.

    Args:
        key: The run's chain key.
        manifest: The manifest's fields as published (options that look like credentials
            redacted, see :func:`itbench.store.published_manifest`).
    """
    return hmac.new(key, b"run\n" + canonical(manifest), hashlib.sha256).hexdigest()


def canonical(fields: dict[str, Any]) -> bytes:
    """A line's fields, its link left out, as canonical JSON (sorted keys, no spaces)."""
    body = {k: v for k, v in fields.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def link(key: bytes, previous: str, fields: dict[str, Any]) -> str:
    """The link of a line with ``fields`` that follows a line whose link is ``previous``."""
    return hmac.new(key, previous.encode() + b"\n" + canonical(fields), hashlib.sha256).hexdigest()


def verify(key: bytes, previous: str, fields: dict[str, Any]) -> bool:
    """Whether a line's recorded link follows ``previous`` (constant-time comparison)."""
    recorded = fields.get(FIELD)
    return isinstance(recorded, str) and hmac.compare_digest(recorded, link(key, previous, fields))
