"""Faults of the work queues: a stopped consumer, a slow one and a poison message."""

from __future__ import annotations

from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import EmbeddedShop
from itbench_sre.faults.base import (
    _FLAG_NAME,
    Check,
    Mechanism,
    Param,
    _config_change,
    _new_release,
    _no_consumer,
    _register,
    _restore,
    _rollback,
    _same,
    _set_and_restart,
)

_register(
    Mechanism(
        "queue_consumer_stopped",
        "consumer_stopped",
        tuple(topology.QUEUES),
        _config_change(_no_consumer),
        _restore,
        _same,
        lambda t, p: [Check(f'max(queue_depth{{queue="{topology.QUEUES[t]}"}}) > 6')],
        _rollback,
        observable="one work queue grows and nothing consumes it; shoppers are unaffected",
        summary="Deploys a configuration of a queue's consumer with the flag that runs its "
        "consumer switched off: the queue backs up.",
        params=(
            Param(
                "flag",
                str,
                "queue_consumer",
                "The flag that runs the consumer (switched off).",
                choices=lambda t: topology.SERVING_FLAGS.get(t, ()),
            ),
            _FLAG_NAME,
        ),
        spread=False,
    )
)


_register(
    Mechanism(
        "slow_consumer",
        "slow_consumer",
        ("notification",),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [Check(f'max(queue_depth{{queue="{topology.QUEUES[t]}"}}) > 4')],
        _rollback,
        summary="Deploys the consumer's newest release, which takes most of a second per "
        "message: it keeps consuming, slower than orders arrive.",
        observable="the order queue grows while the consumer keeps handling messages, slower "
        "than checkout produces them",
        spread=False,
    )
)


def _poison(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(redis_commands=[["LPUSH", topology.QUEUES[target], '{"order": "', "x"]])


_register(
    Mechanism(
        "poison_message",
        "poison_message",
        tuple(topology.QUEUES),
        _poison,
        lambda shop, t, p: ChangeSet(
            redis_commands=[["DEL", f"{topology.QUEUES[t]}:processing"]],
            programs=[("restart", t)],
        ),
        _same,
        # The log, not the scrapes: a consumer that dies on its first message lives too
        # briefly to be scraped between restarts.
        lambda t, p: [
            Check(
                log_service=t,
                log_text="cannot read order message",
                log_meaning="its consumer cannot read a queued order message",
            )
        ],
        lambda t, p: _set_and_restart({"dead_letter": True})(t, p),
        summary="An unreadable message reaches a work queue: its consumer exits on it, "
        "finds it again at every start and never gets past it.",
        observable="a queue's consumer restarts again and again, each time logging that it "
        "cannot read a queued message",
        spread=False,
    )
)
