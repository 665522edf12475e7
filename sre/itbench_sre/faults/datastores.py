"""Faults of Redis and PostgreSQL.

Stopped, full, out of connections, locked, pools too small and migrated tables.
"""

from __future__ import annotations

from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import JOB_PROGRAM, EmbeddedShop
from itbench_sre.faults.base import (
    _FLAG_MEANING,
    _FLAG_NAME,
    Fix,
    Mechanism,
    Param,
    _config_cause,
    _config_change,
    _errors,
    _fill_redis,
    _flag_fix,
    _flag_on,
    _flags_of,
    _job,
    _register,
    _restore,
    _restore_job,
    _same,
    _set_and_restart,
    _small_pool,
    _targets_with,
    errors_of,
)

#: A client of each datastore whose errors show it is gone.
_CLIENT = {"redis": "cart", "postgres": "catalog"}


def _stopped(name: str, targets: tuple[str, ...], observable: str, summary: str) -> Mechanism:
    """A mechanism that stops one of ``targets`` (a datastore); starting it again is the fix."""
    return Mechanism(
        name,
        "datastore_down",
        targets,
        lambda shop, t, p: ChangeSet(programs=[("stop", t)]),
        lambda shop, t, p: ChangeSet(programs=[("start", t)]),
        _same,
        lambda t, p: [errors_of(_CLIENT[t])],
        lambda t, p: [("start", {"target": t})],
        observable=observable,
        summary=summary,
        held=lambda t: ("postgres.",) if t == "postgres" else (),
    )


_register(
    _stopped(
        "redis_down",
        ("redis",),
        "Redis is stopped; its clients' calls fail (connection refused)",
        "Stops Redis.",
    )
)
_register(
    _stopped(
        "datastore_down",
        topology.DATASTORES,
        "one datastore is stopped; its clients' calls to it fail (connection refused) while the "
        "other datastore serves",
        "Stops a datastore (Redis or PostgreSQL).",
    )
)


#: The Redis clients that can store snapshots there (each has the feature behind a flag).
_SNAPSHOT_WRITERS = _targets_with("redis_snapshots")
_SNAPSHOT_FLAGS = _flags_of({t: ("redis_snapshots",) for t in _SNAPSHOT_WRITERS})


@_config_cause
def _spill(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    """Turn the writer's snapshots on; what it stored before the agent came fills Redis."""
    deploy = _config_change(_flag_on)(shop, target, params)
    deploy.redis_commands = _fill_redis(shop, "redis", params).redis_commands
    return deploy


def _unspill(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    restore = _restore(shop, target, params)
    restore.redis_commands = [["FLUSHALL"]]
    return restore


def _spill_fix(target: str, params: dict[str, Any]) -> Fix:
    # Redis keeps its data across a restart: the writer stopped, and room, mend it.
    return _flag_fix(target, params) + _set_and_restart({"maxmemory": "256mb"})("redis", params)


_register(
    Mechanism(
        "redis_oom",
        "datastore_oom",
        _SNAPSHOT_WRITERS,
        _spill,
        _unspill,
        _same,
        lambda t, p: [errors_of("cart")],
        _spill_fix,
        observable="Redis refuses writes for want of memory, in its clients' logs; one of its "
        "clients writes to it far more often than before, and more room alone fills up again",
        summary="Turns on a feature of one Redis client that stores snapshots in Redis without "
        "expiry; what it stored already fills Redis past its memory limit (no eviction), so "
        "every client's writes fail, also after a restart, since Redis keeps its data.",
        params=(
            Param("megabytes", int, 72, "Data already stored, MB (in steps of 8).", minimum=8),
            Param("flag", str, "redis_snapshots", _FLAG_MEANING, choices=_SNAPSHOT_FLAGS),
            _FLAG_NAME,
        ),
        # The writer's snapshots fail where every client's writes fail: in Redis.
        anchors=lambda t, p: ["redis"],
    )
)


_register(
    Mechanism(
        "pg_connection_exhaustion",
        "connection_exhaustion",
        ("postgres",),
        lambda shop, t, p: _job(shop, {"connections": int(p["connections"])}),
        _restore_job,
        _same,
        lambda t, p: [errors_of("catalog")],
        lambda t, p: [("stop", {"target": JOB_PROGRAM})],
        summary=f"The batch job `{JOB_PROGRAM}` holds many PostgreSQL sessions and exhausts "
        "the server's connection slots.",
        observable="PostgreSQL's clients fail to connect for want of connection slots while no service's "
        "open files grow",
        params=(Param("connections", int, 40, "Sessions the job keeps open.", minimum=1),),
        aliases=lambda t: [JOB_PROGRAM],
    )
)


#: The service whose requests wait on each table a service may keep locked.
_TABLE_USER = {"products": "catalog", "orders": "checkout"}
#: The services that can keep a table locked (each has the feature behind a flag per table).
_LOCK_HOLDERS = _targets_with(*(f"lock_{table}" for table in _TABLE_USER))


def _locked_table(params: dict[str, Any]) -> str:
    return str(params["flag"]).removeprefix("lock_")


_register(
    Mechanism(
        "pg_slow_query",
        "slow_query",
        _LOCK_HOLDERS,
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t, p: [errors_of(_TABLE_USER[_locked_table(p)])],
        _flag_fix,
        summary="Turns on a feature of one PostgreSQL client that takes a table lock in a "
        "transaction it never ends: every other session's statements on the table wait.",
        observable="statements on one table time out in the log of the service that uses it, "
        "while the database is up and has free connection slots; the session that holds the "
        "lock belongs to another client (or to the same one), idle in its transaction, and "
        "a restart of that client takes the lock again",
        params=(
            Param(
                "flag",
                str,
                "lock_products",
                "Feature turned on: `lock_products` holds up catalog's reads, `lock_orders` "
                "checkout's order inserts.",
                choices=lambda t: tuple(f"lock_{table}" for table in _TABLE_USER),
            ),
            _FLAG_NAME,
        ),
        # The waits happen in the database: the spread starts at its clients' calls to it.
        anchors=lambda t, p: ["postgres"],
    )
)


_register(
    Mechanism(
        "pool_too_small",
        "pool_exhaustion",
        ("catalog",),
        _config_change(_small_pool),
        _restore,
        _same,
        _errors,
        lambda t, p: _set_and_restart({"pool_size": 4, "pool_timeout": 1.0})(t, p),
        summary="Deploys a configuration with a tiny database pool and acquire timeout.",
        params=(
            Param("pool_size", int, 1, "Connections in the pool.", minimum=1),
            Param("pool_timeout", float, 0.01, "Pool acquire timeout, seconds.", minimum=0),
        ),
        observable="the service's database pool is always in use and requests fail waiting for a connection",
    )
)


_RENAMES = {
    "orders": ("shipping_cents", "shipping_fee_cents"),
    "products": ("price_cents", "price"),
}


def _migrate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    old, new = _RENAMES[params["table"]]
    return ChangeSet(sql=[f"ALTER TABLE {params['table']} RENAME COLUMN {old} TO {new}"])


def _unmigrate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    old, new = _RENAMES[params["table"]]
    return ChangeSet(sql=[f"ALTER TABLE {params['table']} RENAME COLUMN {new} TO {old}"])


_register(
    Mechanism(
        "schema_migration",
        "schema_migration",
        ("postgres",),
        _migrate,
        _unmigrate,
        _same,
        lambda t, p: [errors_of("checkout" if p["table"] == "orders" else "catalog")],
        None,
        summary="A schema migration renames a column that a service's queries still use.",
        params=(
            Param(
                "table",
                str,
                "orders",
                "Table migrated (orders breaks checkout's inserts, products catalog's reads).",
                choices=lambda t: tuple(_RENAMES),
            ),
        ),
        observable="the queries of the table's users fail against a table whose shape "
        "changed under them; no service's configuration or release changed",
    )
)
