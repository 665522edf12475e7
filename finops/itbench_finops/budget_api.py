"""Budgets operations the endpoint adds to moto: subscribers and in-place updates.

moto keeps each notification's subscribers but cannot show or change them, and has no
``UpdateBudget``. A misdirected alert is a budget fault agents must be able to see and fix
through the ordinary Budgets API, so the endpoint installs these operations into moto's
Budgets handler before it starts serving.

Every operation that stores a budget or a notification also checks its required fields, which
moto's own reads (and the harness's reading of the final state) depend on: a malformed budget
sent by hand is refused instead of breaking every later ``DescribeBudgets``.
"""

from __future__ import annotations

import json
from typing import Any


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two notification documents describe the same notification."""

    def key(n: dict[str, Any]) -> tuple[Any, ...]:
        try:
            threshold: Any = float(n.get("Threshold", 0))
        except (TypeError, ValueError):
            threshold = n.get("Threshold")
        return (
            n.get("NotificationType"),
            n.get("ComparisonOperator"),
            threshold,
            n.get("ThresholdType", "PERCENTAGE"),
        )

    return key(a) == key(b)


#: Fields every stored budget and notification must keep: moto's own reads depend on them.
BUDGET_FIELDS = ("BudgetName", "TimeUnit", "BudgetType")
NOTIFICATION_FIELDS = ("NotificationType", "ComparisonOperator", "Threshold")


def missing_fields(document: Any, fields: tuple[str, ...]) -> list[str]:
    """Required fields absent or malformed in a budget or notification document.

    A budget needs a numeric ``BudgetLimit.Amount`` (or planned limits), a notification a
    numeric ``Threshold``; a document that is not a mapping lacks everything.
    """
    if not isinstance(document, dict):
        return list(fields)
    out = [f for f in fields if document.get(f) in (None, "")]
    if "Threshold" in fields and "Threshold" not in out and not _number(document["Threshold"]):
        out.append("Threshold")
    if "BudgetType" in fields and "PlannedBudgetLimits" not in document:
        limit = document.get("BudgetLimit")
        if not isinstance(limit, dict) or not _number(limit.get("Amount")):
            out.append("BudgetLimit.Amount")
    return out


def _number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _set_subscribers(notification: Any, subscribers: list[Any]) -> None:
    # moto stores the request's subscriber list as is (its annotation says dict).
    notification.subscribers = subscribers


def install() -> None:
    """Add the missing Budgets operations to moto's handler (idempotent)."""
    from moto.budgets.exceptions import NotFoundException
    from moto.budgets.models import Budget, Notification
    from moto.budgets.responses import BudgetsResponse
    from moto.core.exceptions import JsonRESTError
    from moto.core.utils import unix_time

    if getattr(BudgetsResponse, "_itbench_extended", False):
        return

    def require(document: Any, fields: tuple[str, ...], what: str) -> None:
        missing = missing_fields(document, fields)
        if missing:
            raise JsonRESTError("InvalidParameterException", f"{what} lacks {', '.join(missing)}")

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
        new = self._get_param("NewNotification")
        require(new, NOTIFICATION_FIELDS, "NewNotification")
        n.details = new
        return json.dumps({})

    def update_budget(self: BudgetsResponse) -> str:
        account_id = self._get_param("AccountId")
        new = self._get_param("NewBudget")
        require(new, BUDGET_FIELDS, "NewBudget")
        budget = self.backend.budgets[account_id].get(new.get("BudgetName", ""))
        if budget is None:
            raise NotFoundException(
                f"Unable to update budget: {new.get('BudgetName')} - the budget doesn't exist."
            )
        new["LastUpdatedTime"] = unix_time()
        new.setdefault("TimePeriod", budget.budget.get("TimePeriod"))
        budget.budget = new
        return json.dumps({})

    native_create_budget = BudgetsResponse.create_budget
    native_create_notification = BudgetsResponse.create_notification

    def create_budget(self: BudgetsResponse) -> str:
        require(self._get_param("Budget"), BUDGET_FIELDS, "Budget")
        for entry in self._get_param("NotificationsWithSubscribers", []) or []:
            note = entry.get("Notification") if isinstance(entry, dict) else None
            require(note, NOTIFICATION_FIELDS, "Notification")
        return native_create_budget(self)

    def create_notification(self: BudgetsResponse) -> str:
        require(self._get_param("Notification"), NOTIFICATION_FIELDS, "Notification")
        return native_create_notification(self)

    for func in (
        create_budget,
        create_notification,
        describe_subscribers_for_notification,
        create_subscriber,
        delete_subscriber,
        update_subscriber,
        update_notification,
        update_budget,
    ):
        setattr(BudgetsResponse, func.__name__, func)
    BudgetsResponse._itbench_extended = True  # type: ignore[attr-defined]
