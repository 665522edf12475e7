"""The endpoint's harness API: what only the harness may tell the endpoint.

Served by the endpoint process under ``/moto-api/harness/`` behind the admin token (see
:func:`itbench_finops.endpoint.guard_requests`):

- ``times``: the creation, launch, snapshot and stop times of seeded resources. moto stamps
  everything with the moment of the call; an account whose volumes were all created a second
  ago cannot be cleaned by age, so the harness dates each resource by its trial's timeline.
- ``billing``: the billing data Cost Explorer answers from (:mod:`itbench_finops.cost_explorer`)
  and the accounts' names.

Imports moto only inside the handlers: the endpoint loads this module before moto starts.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

REGION = "us-east-1"
#: The billing data of the account, as the harness sent it (read by Cost Explorer).
BILLING: dict[str, Any] = {"rows": [], "accounts": {}, "payer": "", "end": ""}


class HarnessError(ValueError):
    """A harness request the endpoint cannot carry out."""


def _when(text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError as exc:
        raise HarnessError(f"not a timestamp: {text!r}") from exc


def _gmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S GMT")


def _date(kind: str, account: str, rid: str, created: datetime, stopped: datetime | None) -> None:
    from moto.autoscaling.models import autoscaling_backends
    from moto.core.utils import iso_8601_datetime_with_milliseconds
    from moto.ec2.models import ec2_backends
    from moto.elbv2.models import elbv2_backends
    from moto.rds.models import rds_backends
    from moto.s3.models import s3_backends

    ec2 = ec2_backends[account][REGION]
    if kind == "instance":
        inst = ec2.get_instance(rid)
        inst.launch_time = created
        for mapping in inst.block_device_mapping.values():
            volume = ec2.get_volume(mapping.volume_id)
            volume.create_time = created
            if volume.attachment is not None:
                volume.attachment.attach_time = created
        if stopped is not None:
            inst._reason = f"User initiated ({_gmt(stopped)})"
    elif kind == "volume":
        ec2.get_volume(rid).create_time = created
    elif kind == "snapshot":
        ec2.snapshots[rid].start_time = created
    elif kind == "image":
        ec2.amis[rid].creation_date = created
    elif kind == "nat_gateway":
        ec2.nat_gateways[rid]._created_at = created
    elif kind == "database":
        db = rds_backends[account][REGION].databases[rid]
        db.created = created
        db.instance_create_time = created
    elif kind == "load_balancer":
        lb = elbv2_backends[account][REGION].load_balancers[rid]
        lb.created_time = iso_8601_datetime_with_milliseconds(created)
    elif kind == "bucket":
        s3_backends[account]["aws"].buckets[rid].creation_date = created
    elif kind == "asg":
        group = autoscaling_backends[account][REGION].autoscaling_groups[rid]
        group.created_time = created.isoformat()
    else:
        raise HarnessError(f"cannot date a {kind!r}")


def set_times(body: dict[str, Any]) -> dict[str, Any]:
    """Date the resources of ``body["resources"]``: kind, account, id, created[, stopped]."""
    done = 0
    for entry in body.get("resources", []):
        stopped = entry.get("stopped")
        try:
            _date(
                str(entry["kind"]),
                str(entry["account"]),
                str(entry["id"]),
                _when(entry["created"]),
                _when(stopped) if stopped else None,
            )
        except (KeyError, AttributeError) as exc:
            raise HarnessError(f"cannot date {entry!r}: {exc!r}") from exc
        done += 1
    return {"dated": done}


def set_billing(body: dict[str, Any]) -> dict[str, Any]:
    """Keep the billing rows, the account names, the payer and the period's end."""
    rows = body.get("rows")
    if not isinstance(rows, list):
        raise HarnessError("billing needs rows")
    BILLING.update(
        rows=rows,
        accounts=dict(body.get("accounts") or {}),
        payer=str(body.get("payer", "")),
        end=str(body.get("end", "")),
    )
    return {"rows": len(rows)}


#: Handlers by path under ``/moto-api/harness/``.
HANDLERS = {"times": set_times, "billing": set_billing}


def handle(path: str, body: bytes) -> tuple[str, bytes]:
    """Answer one harness request: an HTTP status line and a JSON body."""
    handler = HANDLERS.get(path)
    if handler is None:
        return "404 Not Found", json.dumps({"error": f"no harness call {path!r}"}).encode()
    try:
        data = json.loads(body or b"{}")
        if not isinstance(data, dict):
            raise HarnessError("the body must be a JSON object")
        return "200 OK", json.dumps(handler(data)).encode()
    except (HarnessError, json.JSONDecodeError) as exc:
        return "400 Bad Request", json.dumps({"error": str(exc)}).encode()
