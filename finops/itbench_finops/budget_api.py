"""Budgets operations the endpoint adds to moto: subscribers and in-place updates.

moto keeps each notification's subscribers but cannot show or change them, and has no
``UpdateBudget``. A misdirected alert is a budget fault agents must be able to see and fix
through the ordinary Budgets API, so the endpoint installs these operations into moto's
Budgets handler before it starts serving.
"""

from __future__ import annotations

import json
from typing import Any


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two notification documents describe the same notification."""

    def key(n: dict[str, Any]) -> tuple[Any, ...]:
        return (
            n.get("NotificationType"),
            n.get("ComparisonOperator"),
            float(n.get("Threshold", 0)),
            n.get("ThresholdType", "PERCENTAGE"),
        )

    return key(a) == key(b)


def _set_subscribers(notification: Any, subscribers: list[Any]) -> None:
    # moto stores the request's subscriber list as is (its annotation says dict).
    notification.subscribers = subscribers


def install() -> None:
    """Add the missing Budgets operations to moto's handler (idempotent)."""
    from moto.budgets.exceptions import NotFoundException
    from moto.budgets.models import Budget, Notification
    from moto.budgets.responses import BudgetsResponse
    from moto.core.utils import unix_time

    if getattr(BudgetsResponse, "_itbench_extended", False):
        return

    def budget_of(self: BudgetsResponse) -> Budget:
        account_id = self._get_param("AccountId")
        name = self._get_param("BudgetName")
        budget = self.backend.budgets[account_id].get(name)
        if budget is None:
            raise NotFoundException(f"Unable to find budget: {name} - the budget doesn't exist.")
        return budget

    def notification_of(self: BudgetsResponse, budget: Budget, param: str) -> Notification:
        wanted = self._get_param(param)
        for n in budget.notifications:
            if _same(n.details, wanted):
                return n
        raise NotFoundException("Unable to find notification - the notification doesn't exist.")

    def describe_subscribers_for_notification(self: BudgetsResponse) -> str:
        n = notification_of(self, budget_of(self), "Notification")
        return json.dumps({"Subscribers": list(n.subscribers), "NextToken": None})

    def create_subscriber(self: BudgetsResponse) -> str:
        n = notification_of(self, budget_of(self), "Notification")
        sub = self._get_param("Subscriber")
        if sub not in n.subscribers:
            _set_subscribers(n, [*n.subscribers, sub])
        return json.dumps({})

    def delete_subscriber(self: BudgetsResponse) -> str:
        n = notification_of(self, budget_of(self), "Notification")
        sub = self._get_param("Subscriber")
        if sub not in n.subscribers:
            raise NotFoundException("Unable to find subscriber - the subscriber doesn't exist.")
        _set_subscribers(n, [s for s in n.subscribers if s != sub])
        return json.dumps({})

    def update_subscriber(self: BudgetsResponse) -> str:
        n = notification_of(self, budget_of(self), "Notification")
        old, new = self._get_param("OldSubscriber"), self._get_param("NewSubscriber")
        if old not in n.subscribers:
            raise NotFoundException("Unable to find subscriber - the subscriber doesn't exist.")
        _set_subscribers(n, [new if s == old else s for s in n.subscribers])
        return json.dumps({})

    def update_notification(self: BudgetsResponse) -> str:
        n = notification_of(self, budget_of(self), "OldNotification")
        n.details = self._get_param("NewNotification")
        return json.dumps({})

    def update_budget(self: BudgetsResponse) -> str:
        account_id = self._get_param("AccountId")
        new = self._get_param("NewBudget")
        budget = self.backend.budgets[account_id].get(new.get("BudgetName", ""))
        if budget is None:
            raise NotFoundException(
                f"Unable to update budget: {new.get('BudgetName')} - the budget doesn't exist."
            )
        new["LastUpdatedTime"] = unix_time()
        new.setdefault("TimePeriod", budget.budget.get("TimePeriod"))
        budget.budget = new
        return json.dumps({})

    for func in (
        describe_subscribers_for_notification,
        create_subscriber,
        delete_subscriber,
        update_subscriber,
        update_notification,
        update_budget,
    ):
        setattr(BudgetsResponse, func.__name__, func)
    BudgetsResponse._itbench_extended = True  # type: ignore[attr-defined]
