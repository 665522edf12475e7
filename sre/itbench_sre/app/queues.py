"""The shop's work queues on Redis: checkout fills each with every order, one service consumes it."""

from __future__ import annotations

#: Queue name by consuming service: the order confirmations (notification) and the
#: checked-out carts to archive (cart).
QUEUES: dict[str, str] = {"notification": "orders", "cart": "carts"}
