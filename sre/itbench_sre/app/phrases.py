"""How the shop words its own messages, and the harmless messages healthy services log.

Each trial draws one phrasing per message (``phrases.json`` under the shop's home, written by
the deployment, read by every instance at start), so no fixed string names a cause. Every
instance also logs, now and then, a message of the kind failures cause (a failed query, a full
disk, a refused password, an unreadable message...) without anything being wrong: a message
proves nothing without its rate and its timing.

This module is imported by every service instance: it imports nothing but the standard library.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

#: The file of a trial's phrasings, under the shop's home.
PHRASES_FILE = "phrases.json"
#: The services' private lookup of what each flag name stands for, under the shop's home.
FEATURES_FILE = "features.json"
#: The services' private lookup of which release has a regression, under the shop's home.
RELEASES_FILE = "releases.json"

#: Every message the shop words itself: a key, then its phrasings (the first one is used when
#: the trial drew none). ``{name}`` fields are filled in.
PHRASES: dict[str, tuple[str, ...]] = {
    "pool_exhausted": (
        "database pool exhausted: no connection within timeout",
        "no free database connection within the pool timeout",
        "gave up waiting for a pooled database connection",
        "connection pool empty: acquire timed out",
    ),
    "over_capacity": (
        "instance over capacity",
        "request shed: instance at its rate limit",
        "too many requests for this instance",
        "load shedding: request limit reached",
    ),
    "database_error": ("database error", "query failed", "database call failed", "sql error"),
    "redis_error": (
        "redis error",
        "cache store call failed",
        "key-value store error",
        "session store failed",
    ),
    "audit": ("audit trail", "audit write failed", "journal append failed", "request log failed"),
    "receipt": ("receipt", "receipt write failed", "could not store the receipt", "receipt store"),
    "unreadable_order": (
        "cannot read order message",
        "order message could not be decoded",
        "malformed order on the queue",
        "failed to parse a queued order",
    ),
    "moved_aside": (
        "unreadable message moved aside",
        "undecodable message dead-lettered",
        "message parked after a decode failure",
        "skipped an unreadable message",
    ),
    "consumer_error": (
        "queue consumer error",
        "order consumer failed",
        "error while draining the order queue",
        "consumer loop error",
    ),
    "memory_exit": (
        "memory limit exceeded, exiting",
        "resident memory over the limit, shutting down",
        "memory budget exhausted: exiting",
        "memory cap reached, process exits",
    ),
    "clock_stepped": ("clock stepped", "system time jumped", "wall clock adjusted", "time step"),
    "date_refused": (
        "request date outside the allowed window ({skew}s)",
        "request timestamp too far off ({skew}s)",
        "request time skew too large ({skew}s)",
        "timestamp rejected, outside the tolerance ({skew}s)",
    ),
    "call_failed": (
        "call to {upstream} failed",
        "upstream {upstream} unavailable",
        "request to {upstream} did not succeed",
        "{upstream} call error",
    ),
    "cart_entry": (
        "cannot serialize cart entry {item}",
        "cart entry {item} could not be encoded",
        "bad cart entry {item}",
        "failed to store cart entry {item}",
    ),
    "ranking_failed": (
        "ranking model unavailable for {count} products",
        "cannot rank {count} candidates: model not loaded",
        "recommendation ranking failed ({count} items)",
        "ranker error over {count} products",
    ),
    "quote_failed": (
        "no carrier rate for {items} items",
        "carrier table lookup failed for a parcel of {items}",
        "cannot quote shipping of {items} items",
        "rate lookup error ({items} items)",
    ),
    "charge_rejected": (
        "charge rejected by processor adapter: amount {amount}",
        "payment adapter refused the charge of {amount}",
        "processor declined amount {amount}",
        "charge of {amount} failed at the adapter",
    ),
}

#: Mean seconds between two harmless messages of one instance.
CHATTER_MEAN_S = 20.0

#: Texts of the kind failures cause, logged now and then by healthy instances as a failed
#: request would log them: (phrase key or ``None``, the error text, the status). Datastore and
#: system texts are the real ones.
CHATTER: tuple[tuple[str | None, str, int], ...] = (
    (
        "database_error",
        'OperationalError: FATAL:  password authentication failed for user "{db_user}"',
        500,
    ),
    ("database_error", "OperationalError: FATAL:  sorry, too many clients already", 500),
    ("database_error", 'UndefinedColumn: column "price" does not exist', 500),
    ("database_error", "QueryCanceled: canceling statement due to statement timeout", 500),
    ("redis_error", "ResponseError: OOM command not allowed when used memory > 'maxmemory'.", 500),
    ("redis_error", "AuthenticationError: invalid username-password pair", 500),
    ("redis_error", "ConnectionError: Connection reset by peer", 500),
    ("audit", "OSError: [Errno 28] No space left on device", 500),
    ("audit", "OSError: [Errno 24] Too many open files", 500),
    ("receipt", "OSError: [Errno 28] No space left on device", 500),
    ("pool_exhausted", "", 503),
    ("over_capacity", "", 503),
    (None, "RuntimeError: can't start new thread", 500),
    (None, "KeyError: 'slot_calendar'", 500),
    ("date_refused", "", 401),
    ("call_failed", "ConnectionResetError: [Errno 104] Connection reset by peer", 0),
    ("call_failed", "timeout after 2s", 0),
    ("call_failed", "SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate has expired", 0),
    ("unreadable_order", "JSONDecodeError: Expecting value: line 1 column 1 (char 0)", 0),
    ("clock_stepped", "", 0),
)


def draw(rng: random.Random) -> dict[str, int]:
    """One phrasing per message (indices into :data:`PHRASES`)."""
    return {key: rng.randrange(len(options)) for key, options in sorted(PHRASES.items())}


class Phrasebook:
    """A trial's wording of the shop's messages.

    Args:
        choice: The drawn phrasing of each message (missing: the first).
    """

    def __init__(self, choice: dict[str, int] | None = None) -> None:
        self.choice = choice or {}

    @classmethod
    def load(cls, home: Path) -> Phrasebook:
        """The phrasings of the shop whose home is ``home`` (none drawn: the first ones)."""
        try:
            data = json.loads((home / PHRASES_FILE).read_text())
            return cls({str(k): int(v) for k, v in data.items()})
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def say(self, key: str, **fields: Any) -> str:
        """The message ``key`` in this trial's words, its fields filled in."""
        options = PHRASES[key]
        text = options[self.choice.get(key, 0) % len(options)]
        return text.format(**fields) if fields else text

    def wording(self, canonical: str) -> str:
        """This trial's wording of a field-less message given by its first phrasing."""
        for key, options in PHRASES.items():
            if options[0] == canonical:
                return self.say(key)
        return canonical

    def chatter(
        self, rng: random.Random, route: str, upstreams: list[str], db_user: str = "shop"
    ) -> tuple[str, str, dict[str, Any]]:
        """One harmless message of the kind failures cause: ``(level, msg, fields)``.

        Worded and shaped as the real one (a failed request's line, a failed call, a step of
        the clock), for an instance serving ``route``, calling ``upstreams`` and logging in to
        the database as ``db_user``.
        """
        key, error, status = rng.choice(CHATTER)
        error = error.replace("{db_user}", db_user)
        if key == "clock_stepped":
            return "warning", self.say(key), {"offset_s": round(rng.uniform(-0.05, 0.05), 3)}
        if key == "call_failed":
            upstream = rng.choice(upstreams) if upstreams else "redis"
            return (
                "error",
                self.say(key, upstream=upstream),
                {"upstream": upstream, "reason": error},
            )
        if key == "unreadable_order":
            return "fatal", self.say(key), {"reason": error}
        if key == "date_refused":
            skew = rng.choice((-1, 1)) * rng.randint(31, 900)
            error = self.say(key, skew=f"{skew:+d}")
        elif key is not None:
            error = f"{self.say(key)}: {error}" if error else self.say(key)
        fields = {
            "method": "GET",
            "route": route,
            "status": status,
            "duration_ms": round(rng.uniform(2, 40), 1),
            "error": error,
        }
        return "warning" if status == 401 else "error", "request", fields
