"""A strong, honest FinOps heuristic: the yardstick a benchmark must stay ahead of.

It reads only the goal, the tools and the task context (never ids, paths or the catalog) and
parses whatever it can: the engineering handbook's numbers (days, percents, thresholds), the
tags and names its pages protect ("never", "keep", "stay", "exempt", "hold" ...), the policy
tables of budgets and ownership, the billing export, Cost Explorer's data, CloudWatch metrics
and flow logs. Then it applies the usual first-pass FinOps rules of each kind of task. It does
not read a page's tables row by row for their state (open or closed, planned or cancelled,
active or offboarded), nor compare an approved change with what was done: that is the
judgement the benchmark asks of an agent.

Loaded in process (it uses only the ``TaskView`` and the ``Toolbox``):
``itbench evaluate --plugin finops_heuristic --agent finops/heuristic`` with this directory on
``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

from itbench import Agent, AgentSpec, TaskView, Toolbox, ToolError, hookimpl

PROTECTIVE = ("never", "keep", "kept", "stay", "exempt", "hold", "held", "standby", "leave alone")
TICK = re.compile(r"`([^`]+)`")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")


def _when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)


class _Run:
    """One task: the handbook read once, then the rules of the task's kind."""

    def __init__(self, task: TaskView, toolbox: Toolbox) -> None:
        self.task = task
        self.toolbox = toolbox
        self.ctx = task.context
        self.goal = task.goal.lower()
        self.mgmt = str(self.ctx.get("account_id"))
        self.accounts = [a["account_id"] for a in self.ctx.get("accounts", [])] or [self.mgmt]
        self.now = datetime.now(UTC)
        self.docs = self._handbook()
        self.text = "\n".join(self.docs.values())
        self.keys, self.pairs = self._protected_tags()
        self.names = self._protected_names()

    # --- plumbing -----------------------------------------------------------------------

    def d(self, service: str, op: str, account: str | None = None, **params: Any) -> Any:
        return self.toolbox.call(
            "aws_describe", service=service, operation=op, params=params, account_id=account
        )

    def a(self, service: str, op: str, account: str | None = None, **params: Any) -> Any:
        return self.toolbox.call(
            "aws_call", service=service, operation=op, params=params, account_id=account
        )

    def _handbook(self) -> dict[str, str]:
        where = str(self.ctx.get("handbook", ""))
        m = re.search(r"s3://([^/\s]+)/", where)
        if not m:
            return {}
        bucket = m.group(1)
        out = {}
        listing = self.d("s3", "ListObjectsV2", Bucket=bucket)
        for obj in listing.get("Contents", []):
            body = self.d("s3", "GetObject", Bucket=bucket, Key=obj["Key"])
            out[obj["Key"]] = str(body.get("Body", ""))
        return out

    def _protected_tags(self) -> tuple[set[str], set[tuple[str, str]]]:
        keys: set[str] = set()
        pairs: set[tuple[str, str]] = set()
        for sentence in re.split(r"(?<=[.:])\s|\n\n", self.text):
            low = sentence.lower()
            if not any(w in low for w in PROTECTIVE):
                continue
            for k, v in re.findall(r"`([^`]+)`\s*=\s*`([^`]+)`", sentence):
                pairs.add((k, v))
            if "tag" in low:
                for token in TICK.findall(sentence):
                    if "/" not in token and " " not in token and not token[0].isdigit():
                        keys.add(token)
        return keys, pairs

    def _protected_names(self) -> set[str]:
        out: set[str] = set()
        for text in self.docs.values():
            low = text.lower()
            if not any(w in low for w in PROTECTIVE):
                continue
            out.update(re.findall(r"^\|\s*([A-Za-z0-9][\w.-]*)\s*\|", text, re.M))
            out.update(re.findall(r"^- ([A-Za-z0-9][\w.-]*)\s*$", text, re.M))
            out.update(IP.findall(text))
        return out

    def protected(self, name: str, tags: dict[str, str], *extra: str) -> bool:
        if name in self.names or any(x in self.names for x in extra):
            return True
        return any(k in self.keys or (k, v) in self.pairs for k, v in tags.items())

    def near(self, keyword: str, unit: str, default: float) -> float:
        """The first number followed by ``unit`` in a paragraph that mentions ``keyword``."""
        for para in re.split(r"\n\s*\n|\n- ", self.text):
            if keyword.lower() in para.lower():
                m = re.search(rf"(\d+(?:\.\d+)?)\s*{unit}", para)
                if m:
                    return float(m.group(1))
        return default

    def peak(
        self, namespace: str, metric: str, dims: list[dict[str, str]], account: str, stat: str
    ) -> list[float]:
        res = self.d(
            "cloudwatch",
            "GetMetricStatistics",
            account,
            Namespace=namespace,
            MetricName=metric,
            Dimensions=dims,
            StartTime=(self.now - timedelta(days=31)).isoformat(),
            EndTime=(self.now + timedelta(hours=1)).isoformat(),
            Period=3600,
            Statistics=[stat],
        )
        return [p[stat] for p in res.get("Datapoints", [])]

    def committed(self) -> set[str]:
        """Resources whose usage a reservation covers (the export's pricing category)."""
        rows = self.toolbox.call(
            "billing_query", group_by=["ResourceId", "PricingCategory"], limit=100000
        )
        return {r["ResourceId"] for r in rows if r["PricingCategory"] == "Committed"}

    @staticmethod
    def tags(resource: dict[str, Any], key: str = "Tags") -> dict[str, str]:
        return {t["Key"]: t.get("Value", "") for t in resource.get(key) or []}

    # --- dispatch -------------------------------------------------------------------------

    def run(self) -> dict[str, Any] | None:
        g = self.goal
        for words, handler in (
            (("reserved instances",), self.reserved),
            (("savings plan",), self.savings_plan),
            (("allocat",), self.allocation),
            (("budget alert", "forecast"), self.forecast),
            (("budget",), self.budget),
            (("auto scaling",), self.autoscaling),
            (("over-provisioned",), self.rightsizing),
            (("storage",), self.storage),
            (("data transfer",), self.transfer),
            (("idle",), self.idle),
            (("spend went up", "unexplained"), self.anomaly),
        ):
            if any(w in g for w in words):
                return handler()
        return None

    # --- idle -----------------------------------------------------------------------------

    def idle(self) -> dict[str, Any]:
        grace = self.near("volume", "days", 7)
        stopped_days = self.near("stopped", "days", 30)
        snap_days = self.near("snapshot", "days", 90)
        lb_days = self.near("load balancer", "days", 14)
        changed = 0
        for acct in self.accounts:
            changed += self._idle_account(acct, grace, stopped_days, snap_days, lb_days)
        return {"incident": changed > 0}

    def _idle_account(
        self, acct: str, grace: float, stopped_days: float, snap_days: float, lb_days: float
    ) -> int:
        changed = 0
        ec2 = [
            i
            for r in self.d("ec2", "DescribeInstances", acct)["Reservations"]
            for i in r["Instances"]
        ]
        for inst in ec2:
            tags = self.tags(inst)
            reason = str(inst.get("StateTransitionReason", ""))
            m = re.search(r"\((\d{4}-\d\d-\d\d)", reason)
            if inst["State"]["Name"] != "stopped" or not m:
                continue
            age = (self.now.date() - date.fromisoformat(m.group(1))).days
            if age <= stopped_days or self.protected(tags.get("Name", ""), tags):
                continue
            vols = [b["Ebs"]["VolumeId"] for b in inst.get("BlockDeviceMappings", []) if "Ebs" in b]
            self.a("ec2", "TerminateInstances", acct, InstanceIds=[inst["InstanceId"]])
            left = {v["VolumeId"] for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]}
            for v in vols:
                if v in left:
                    self.a("ec2", "DeleteVolume", acct, VolumeId=v)
            changed += 1
        for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]:
            tags = self.tags(v)
            age = (self.now - _when(v["CreateTime"])).days
            if (
                v["State"] == "available"
                and age > grace
                and not self.protected(tags.get("Name", ""), tags)
            ):
                self.a("ec2", "DeleteVolume", acct, VolumeId=v["VolumeId"])
                changed += 1
        for e in self.d("ec2", "DescribeAddresses", acct)["Addresses"]:
            tags = self.tags(e)
            if e.get("AssociationId") or self.protected(
                tags.get("Name", ""), tags, e.get("PublicIp", "")
            ):
                continue
            self.a("ec2", "ReleaseAddress", acct, AllocationId=e["AllocationId"])
            changed += 1
        volumes = {v["VolumeId"] for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]}
        images = self.d("ec2", "DescribeImages", acct, Owners=["self"])["Images"]
        used = {
            m["Ebs"]["SnapshotId"]
            for i in images
            for m in i.get("BlockDeviceMappings", [])
            if "Ebs" in m
        }
        for s in self.d("ec2", "DescribeSnapshots", acct, OwnerIds=["self"])["Snapshots"]:
            tags = self.tags(s)
            age = (self.now - _when(s["StartTime"])).days
            if s["SnapshotId"] in used or s.get("VolumeId") in volumes or age <= snap_days:
                continue
            if not self.protected(tags.get("Name", ""), tags):
                with contextlib.suppress(ToolError):
                    self.a("ec2", "DeleteSnapshot", acct, SnapshotId=s["SnapshotId"])
                    changed += 1
        for lb in self.d("elbv2", "DescribeLoadBalancers", acct)["LoadBalancers"]:
            arn = lb["LoadBalancerArn"]
            age = (self.now - _when(lb["CreatedTime"])).days
            tags = self.tags(
                self.d("elbv2", "DescribeTags", acct, ResourceArns=[arn])["TagDescriptions"][0]
            )
            dim = [{"Name": "LoadBalancer", "Value": arn.split(":loadbalancer/", 1)[1]}]
            served = sum(self.peak("AWS/ApplicationELB", "RequestCount", dim, acct, "Sum"))
            if served == 0 and age > lb_days and not self.protected(lb["LoadBalancerName"], tags):
                self.a("elbv2", "DeleteLoadBalancer", acct, LoadBalancerArn=arn)
                changed += 1
        for db in self.d("rds", "DescribeDBInstances", acct)["DBInstances"]:
            ident = db["DBInstanceIdentifier"]
            tags = self.tags(db, "TagList")
            dim = [{"Name": "DBInstanceIdentifier", "Value": ident}]
            if (
                max(self.peak("AWS/RDS", "DatabaseConnections", dim, acct, "Maximum"), default=0)
                > 0
            ):
                continue
            if not self.protected(ident, tags):
                self.a(
                    "rds",
                    "DeleteDBInstance",
                    acct,
                    DBInstanceIdentifier=ident,
                    SkipFinalSnapshot=True,
                )
                changed += 1
        changed += self._idle_nats(acct, ec2)
        return changed

    def _idle_nats(self, acct: str, instances: list[dict[str, Any]]) -> int:
        changed = 0
        subnets_in_use = {
            i.get("SubnetId") for i in instances if i["State"]["Name"] != "terminated"
        }
        tables = self.d("ec2", "DescribeRouteTables", acct)["RouteTables"]
        for nat in self.d("ec2", "DescribeNatGateways", acct)["NatGateways"]:
            if nat.get("State") != "available":
                continue
            nid = nat["NatGatewayId"]
            dim = [{"Name": "NatGatewayId", "Value": nid}]
            if sum(self.peak("AWS/NATGateway", "BytesOutToDestination", dim, acct, "Sum")) > 0:
                continue
            mine = [
                t for t in tables if any(r.get("NatGatewayId") == nid for r in t.get("Routes", []))
            ]
            subnets = {a.get("SubnetId") for t in mine for a in t.get("Associations", [])}
            tags = self.tags(nat)
            if subnets & subnets_in_use or self.protected(tags.get("Name", ""), tags):
                continue
            for t in mine:
                self.a(
                    "ec2",
                    "DeleteRoute",
                    acct,
                    RouteTableId=t["RouteTableId"],
                    DestinationCidrBlock="0.0.0.0/0",
                )
            self.a("ec2", "DeleteNatGateway", acct, NatGatewayId=nid)
            for address in nat.get("NatGatewayAddresses", []):
                with contextlib.suppress(ToolError):
                    self.a(
                        "ec2", "DisassociateAddress", acct, AssociationId=address["AssociationId"]
                    )
                self.a("ec2", "ReleaseAddress", acct, AllocationId=address["AllocationId"])
            changed += 1
        return changed

    # --- sizing ---------------------------------------------------------------------------

    def rightsizing(self) -> dict[str, Any]:
        recommend = "change nothing" in self.goal
        cpu_target = self.near("CPU", "%", 80)
        mem_target = self.near("memory", "%", 90)
        reserved = self.committed()
        recs = []
        for acct in self.accounts:
            prices = self.toolbox.call("price_list", section="ec2")
            for r in self.d("ec2", "DescribeInstances", acct)["Reservations"]:
                for inst in r["Instances"]:
                    tags = self.tags(inst)
                    iid = inst["InstanceId"]
                    if inst["State"]["Name"] != "running" or "aws:autoscaling:groupName" in tags:
                        continue
                    if iid in reserved or self.protected(tags.get("Name", ""), tags):
                        continue
                    dim = [{"Name": "InstanceId", "Value": iid}]
                    cpu = max(
                        self.peak("AWS/EC2", "CPUUtilization", dim, acct, "Maximum"), default=None
                    )
                    mem = max(
                        self.peak("CWAgent", "mem_used_percent", dim, acct, "Maximum"), default=0.0
                    )
                    if cpu is None:
                        continue
                    best = self._best(
                        prices, inst["InstanceType"], cpu / cpu_target, mem / mem_target
                    )
                    if best is None:
                        continue
                    recs.append({"resource_id": iid, "recommended_type": best})
                    if not recommend:
                        self.a("ec2", "StopInstances", acct, InstanceIds=[iid])
                        self.a(
                            "ec2",
                            "ModifyInstanceAttribute",
                            acct,
                            InstanceId=iid,
                            InstanceType={"Value": best},
                        )
                        self.a("ec2", "StartInstances", acct, InstanceIds=[iid])
            db_prices = self.toolbox.call("price_list", section="rds")
            for db in self.d("rds", "DescribeDBInstances", acct)["DBInstances"]:
                ident, cls = db["DBInstanceIdentifier"], db["DBInstanceClass"]
                if self.protected(ident, self.tags(db, "TagList")) or cls not in db_prices:
                    continue
                dim = [{"Name": "DBInstanceIdentifier", "Value": ident}]
                cpu = max(
                    self.peak("AWS/RDS", "CPUUtilization", dim, acct, "Maximum"), default=None
                )
                free = min(
                    self.peak("AWS/RDS", "FreeableMemory", dim, acct, "Minimum"), default=None
                )
                if cpu is None:
                    continue
                total = db_prices[cls]["memory_gib"] * 2**30
                used = 100 * (1 - free / total) if free is not None else 0.0
                best = self._best(db_prices, cls, cpu / cpu_target, used / mem_target)
                if best is None:
                    continue
                recs.append({"resource_id": ident, "recommended_type": best})
                if not recommend:
                    self.a(
                        "rds",
                        "ModifyDBInstance",
                        acct,
                        DBInstanceIdentifier=ident,
                        DBInstanceClass=best,
                        ApplyImmediately=True,
                    )
        return {"incident": bool(recs), "recommendations": recs}

    @staticmethod
    def _best(
        prices: dict[str, Any], current: str, cpu_share: float, mem_share: float
    ) -> str | None:
        if current not in prices:
            return None
        fam = current.rsplit(".", 1)[0]
        have = prices[current]
        fits = [
            (p["hourly"], t)
            for t, p in prices.items()
            if t.rsplit(".", 1)[0] == fam
            and p["vcpu"] >= have["vcpu"] * cpu_share - 1e-9
            and p["memory_gib"] >= have["memory_gib"] * mem_share - 1e-9
        ]
        best = min(fits)[1] if fits else current
        return best if prices[best]["hourly"] < have["hourly"] else None

    # --- storage and transfer ---------------------------------------------------------------

    def storage(self) -> dict[str, Any]:
        changed = 0
        cold = self.near("cold", "times", 10)
        days = [int(x) for x in re.findall(r"after (\d+) days", self.text)] + [30, 30]
        classes = re.findall(
            r"\b(GLACIER_IR|STANDARD_IA|GLACIER|DEEP_ARCHIVE|ONEZONE_IA)\b", self.text
        )
        target = classes[0] if classes else "STANDARD_IA"
        for acct in self.accounts:
            for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]:
                if v["VolumeType"] != "gp2" or not v.get("Attachments"):
                    continue
                dim = [{"Name": "VolumeId", "Value": v["VolumeId"]}]
                ops = [
                    a + b
                    for a, b in zip(
                        sorted(self.peak("AWS/EBS", "VolumeReadOps", dim, acct, "Sum")),
                        sorted(self.peak("AWS/EBS", "VolumeWriteOps", dim, acct, "Sum")),
                        strict=False,
                    )
                ]
                iops = max(3000, math.ceil(max(ops, default=0) / 3600))
                self.a(
                    "ec2", "ModifyVolume", acct, VolumeId=v["VolumeId"], VolumeType="gp3", Iops=iops
                )
                changed += 1
            for b in self.d("s3", "ListBuckets", acct)["Buckets"]:
                name = b["Name"]
                dim = [
                    {"Name": "BucketName", "Value": name},
                    {"Name": "FilterId", "Value": "EntireBucket"},
                ]
                reads = self.peak("AWS/S3", "GetRequests", dim, acct, "Sum")
                if not reads or sum(reads) / len(reads) >= cold or name in self.names:
                    continue
                rule = {
                    "ID": "cold",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "Transitions": [{"Days": days[0], "StorageClass": target}],
                    "NoncurrentVersionExpiration": {"NoncurrentDays": days[1]},
                }
                self.a(
                    "s3",
                    "PutBucketLifecycleConfiguration",
                    acct,
                    Bucket=name,
                    LifecycleConfiguration={"Rules": [rule]},
                )
                changed += 1
        return {"incident": changed > 0}

    def transfer(self) -> dict[str, Any]:
        changed = 0
        for acct in self.accounts:
            tables = self.d("ec2", "DescribeRouteTables", acct)["RouteTables"]
            for nat in self.d("ec2", "DescribeNatGateways", acct)["NatGateways"]:
                eni = nat["NatGatewayAddresses"][0]["NetworkInterfaceId"]
                try:
                    events = self.d(
                        "logs",
                        "GetLogEvents",
                        acct,
                        logGroupName="/vpc/flow-logs",
                        logStreamName=f"{eni}-all",
                    )["events"]
                except ToolError:
                    continue
                by_service: dict[str, float] = defaultdict(float)
                for e in events:
                    fields = e["message"].split()
                    by_service[fields[-1]] += float(fields[9])
                total = sum(by_service.values())
                if not total or by_service.get("S3", 0) / total <= 0.5:
                    continue
                mine = [
                    t
                    for t in tables
                    if any(
                        r.get("NatGatewayId") == nat["NatGatewayId"] for r in t.get("Routes", [])
                    )
                ]
                for t in mine:
                    self.a(
                        "ec2",
                        "CreateVpcEndpoint",
                        acct,
                        VpcEndpointType="Gateway",
                        VpcId=t["VpcId"],
                        ServiceName="com.amazonaws.us-east-1.s3",
                        RouteTableIds=[t["RouteTableId"]],
                    )
                    changed += 1
        return {"incident": changed > 0}

    # --- root causes ----------------------------------------------------------------------

    def _daily(self, filters: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
        rows = self.toolbox.call(
            "billing_query",
            group_by=[
                "ResourceId",
                "ResourceName",
                "SubAccountId",
                "ServiceName",
                "ResourceType",
                "SkuId",
            ],
            filters=filters or {},
            granularity="daily",
            limit=100000,
        )
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            e = out.setdefault(
                r["ResourceId"], {"row": r, "days": defaultdict(float), "skus": defaultdict(set)}
            )
            e["days"][r["period"]] += r["cost"]
            e["skus"][r["period"]].add(r["SkuId"])
            if r["cost"] > e["row"]["cost"]:
                e["row"] = r  # the resource's biggest line names its service and type
        return out

    def _cause(self, filters: dict[str, str] | None, exclude: set[str]) -> dict[str, Any]:
        daily = self._daily(filters)
        days = sorted({d for e in daily.values() for d in e["days"]})
        if len(days) < 14:
            return {"incident": False}
        recent, before = days[-7:], days[-14:-7]
        best, delta = None, 0.0
        for rid, e in daily.items():
            if e["row"]["ResourceName"] in exclude:
                continue
            change = sum(e["days"][d] for d in recent) - sum(e["days"][d] for d in before)
            if change > delta:
                best, delta = rid, change
        if best is None:
            return {"incident": False}
        e = daily[best]
        costs = [e["days"][d] for d in days]
        first = next(i for i, c in enumerate(costs) if c > 0)
        skus = [e["skus"][d] for d in days]
        if first >= len(days) - 14:
            cause, start = "new_resource", days[first]
        elif any(skus[i] - skus[i - 1] for i in range(len(days) - 14, len(days))):
            i = next(i for i in range(len(days) - 14, len(days)) if skus[i] - skus[i - 1])
            cause, start = "type_change", days[i]
        else:
            base = sorted(costs[: len(days) - 14])[len(costs[: len(days) - 14]) // 2]
            i = next(
                (i for i in range(len(days) - 14, len(days)) if costs[i] > 1.5 * base),
                len(days) - 7,
            )
            cause, start = "usage_spike", days[i]
        row = e["row"]
        return {
            "account_id": row["SubAccountId"],
            "service": row["ServiceName"],
            "resource_id": best,
            "resource_type": row["ResourceType"],
            "cause": cause,
            "start_date": start,
        }

    def anomaly(self) -> dict[str, Any]:
        approved = {
            n
            for line in self.text.splitlines()
            if "approved" in line.lower()
            for n in re.findall(r"\|\s*([a-z][\w-]*)\s*\|", line)
        }
        return self._cause(None, approved)

    def forecast(self) -> dict[str, Any]:
        budgets = self.d("budgets", "DescribeBudgets", AccountId=self.mgmt)["Budgets"]
        for b in budgets:
            spend = b.get("CalculatedSpend", {}).get("ForecastedSpend", {})
            if float(spend.get("Amount", 0)) <= float(b["BudgetLimit"]["Amount"]):
                continue
            for value in b.get("CostFilters", {}).get("TagKeyValue", []):
                key, _, team = value.removeprefix("user:").partition("$")
                return self._cause({f"Tags.{key}": team}, set())
        return self._cause(None, set())

    # --- budgets, capacity, allocation, commitments ----------------------------------------

    def budget(self) -> dict[str, Any]:
        cause = None
        for b in self.d("budgets", "DescribeBudgets", AccountId=self.mgmt)["Budgets"]:
            name = b["BudgetName"]
            row = next((line for line in self.text.splitlines() if f"| {name} |" in line), None)
            if row is None:
                continue
            cells = [c.strip() for c in row.strip("|").split("|")]
            nums = [
                float(x.replace(",", "")) for x in re.findall(r"\b\d[\d,]*(?:\.\d+)?\b", cells[1])
            ]
            amount = nums[0] if nums else float(b["BudgetLimit"]["Amount"])
            unit = next(
                (u for u in ("DAILY", "MONTHLY", "QUARTERLY", "ANNUALLY") if u in row),
                b["TimeUnit"],
            )
            ntype = "FORECASTED" if "FORECASTED" in row else "ACTUAL"
            pct = re.search(r"(\d+)%", row)
            mails = EMAIL.findall(row)
            notes = self.d(
                "budgets", "DescribeNotificationsForBudget", AccountId=self.mgmt, BudgetName=name
            )["Notifications"]
            subs = []
            if notes:
                subs = [
                    s["Address"]
                    for s in self.d(
                        "budgets",
                        "DescribeSubscribersForNotification",
                        AccountId=self.mgmt,
                        BudgetName=name,
                        Notification=notes[0],
                    )["Subscribers"]
                ]
            threshold = float(pct.group(1)) if pct else (notes[0]["Threshold"] if notes else 80)
            want_subs = mails or subs
            found = None
            if abs(float(b["BudgetLimit"]["Amount"]) - amount) > 0.005:
                found = "amount"
            elif b["TimeUnit"] != unit:
                found = "time_unit"
            elif notes and notes[0]["NotificationType"] != ntype:
                found = "notification_type"
            elif notes and float(notes[0]["Threshold"]) != threshold:
                found = "threshold"
            elif sorted(subs) != sorted(want_subs):
                found = "subscriber"
            if found is None:
                continue
            cause = cause or found
            doc = {k: b[k] for k in ("BudgetName", "TimeUnit", "BudgetType") if k in b}
            doc.update(BudgetLimit={"Amount": f"{amount:.2f}", "Unit": "USD"}, TimeUnit=unit)
            if b.get("CostFilters"):
                doc["CostFilters"] = b["CostFilters"]
            self.a("budgets", "DeleteBudget", AccountId=self.mgmt, BudgetName=name)
            self.a(
                "budgets",
                "CreateBudget",
                AccountId=self.mgmt,
                Budget=doc,
                NotificationsWithSubscribers=[
                    {
                        "Notification": {
                            "NotificationType": ntype,
                            "ComparisonOperator": "GREATER_THAN",
                            "Threshold": threshold,
                            "ThresholdType": "PERCENTAGE",
                        },
                        "Subscribers": [
                            {"SubscriptionType": "EMAIL", "Address": m} for m in want_subs
                        ],
                    }
                ],
            )
        return {"incident": cause is not None, "cause": cause}

    def autoscaling(self) -> dict[str, Any]:
        target = self.near("CPU", "%", 70)
        prices = self.toolbox.call("price_list", section="ec2")
        changed = 0
        for acct in self.accounts:
            for g in self.d("autoscaling", "DescribeAutoScalingGroups", acct)["AutoScalingGroups"]:
                name = g["AutoScalingGroupName"]
                if self.protected(name, {}):
                    continue
                dim = [{"Name": "AutoScalingGroupName", "Value": name}]
                cpu = max(
                    self.peak("AWS/EC2", "CPUUtilization", dim, acct, "Maximum"), default=None
                )
                lt = self.d(
                    "ec2",
                    "DescribeLaunchTemplateVersions",
                    acct,
                    LaunchTemplateName=g["LaunchTemplate"]["LaunchTemplateName"],
                )
                itype = lt["LaunchTemplateVersions"][0]["LaunchTemplateData"]["InstanceType"]
                if cpu is None or itype not in prices:
                    continue
                vcpu = prices[itype]["vcpu"]
                busy = cpu / 100 * g["DesiredCapacity"] * vcpu
                need = max(1, math.ceil(busy / (vcpu * target / 100) - 1e-9))
                if need < g["DesiredCapacity"]:
                    self.a(
                        "autoscaling",
                        "UpdateAutoScalingGroup",
                        acct,
                        AutoScalingGroupName=name,
                        MinSize=min(g["MinSize"], need),
                        DesiredCapacity=need,
                        MaxSize=max(g["MaxSize"], need),
                    )
                    changed += 1
        return {"incident": changed > 0}

    def allocation(self) -> dict[str, Any]:
        prefixes = re.findall(r"starts with `([^`]+)` belongs to team `([^`]+)`", self.text)
        by_account = {
            a: t for a, t in re.findall(r"\|\s*(\d{12})[^|]*\|\s*([a-z][\w-]*)\s*\|", self.text)
        }
        shared_pairs = set(re.findall(r"`([^`]+)`\s*=\s*`shared`", self.text))
        low = self.text.lower()
        mode = "even" if "evenly" in low else "proportional" if "proportion" in low else "none"

        def owner(name: str, account: str, tags: dict[str, str]) -> str | None:
            if tags.get("team"):
                return tags["team"]
            if any(tags.get(k) == "shared" for k in shared_pairs):
                return None
            for prefix, team in prefixes:
                if name.startswith(prefix):
                    return team
            return by_account.get(account)

        owners: dict[str, str | None] = {}
        for acct in self.accounts:
            insts = [
                i
                for r in self.d("ec2", "DescribeInstances", acct)["Reservations"]
                for i in r["Instances"]
            ]
            team_of = {i["InstanceId"]: self.tags(i).get("team") for i in insts}
            for i in insts:
                tags = self.tags(i)
                o = owner(tags.get("Name", ""), acct, tags)
                owners[tags.get("Name", "")] = o
                if o and not tags.get("team"):
                    self.a(
                        "ec2",
                        "CreateTags",
                        acct,
                        Resources=[i["InstanceId"]],
                        Tags=[{"Key": "team", "Value": o}],
                    )
                    team_of[i["InstanceId"]] = o
            for e in self.d("ec2", "DescribeAddresses", acct)["Addresses"]:
                tags = self.tags(e)
                o = (
                    tags.get("team")
                    or team_of.get(e.get("InstanceId") or "")
                    or owner(tags.get("Name", ""), acct, tags)
                )
                owners[tags.get("Name", e["AllocationId"])] = o
                if o and not tags.get("team"):
                    self.a(
                        "ec2",
                        "CreateTags",
                        acct,
                        Resources=[e["AllocationId"]],
                        Tags=[{"Key": "team", "Value": o}],
                    )
            for v in self.d("ec2", "DescribeVolumes", acct)["Volumes"]:
                tags = self.tags(v)
                att = (v.get("Attachments") or [{}])[0].get("InstanceId")
                o = (
                    tags.get("team")
                    or team_of.get(att or "")
                    or tags.get("created-by")
                    or owner(tags.get("Name", ""), acct, tags)
                )
                owners.setdefault(tags.get("Name", v["VolumeId"]), o)
                if o and not tags.get("team") and not att:
                    self.a(
                        "ec2",
                        "CreateTags",
                        acct,
                        Resources=[v["VolumeId"]],
                        Tags=[{"Key": "team", "Value": o}],
                    )
            for db in self.d("rds", "DescribeDBInstances", acct)["DBInstances"]:
                tags = self.tags(db, "TagList")
                o = owner(db["DBInstanceIdentifier"], acct, tags)
                owners[db["DBInstanceIdentifier"]] = o
                if o and not tags.get("team"):
                    self.a(
                        "rds",
                        "AddTagsToResource",
                        acct,
                        ResourceName=db["DBInstanceArn"],
                        Tags=[{"Key": "team", "Value": o}],
                    )
            for b in self.d("s3", "ListBuckets", acct)["Buckets"]:
                try:
                    tags = {
                        t["Key"]: t["Value"]
                        for t in self.d("s3", "GetBucketTagging", acct, Bucket=b["Name"])["TagSet"]
                    }
                except ToolError:
                    tags = {}
                o = owner(b["Name"], acct, tags)
                owners[b["Name"]] = o
                if o and not tags.get("team"):
                    self.a(
                        "s3",
                        "PutBucketTagging",
                        acct,
                        Bucket=b["Name"],
                        Tagging={
                            "TagSet": [
                                *({"Key": k, "Value": v} for k, v in tags.items()),
                                {"Key": "team", "Value": o},
                            ]
                        },
                    )
        rows = self.toolbox.call(
            "billing_query", group_by=["ResourceName", "Tags.team"], limit=100000
        )
        alloc: dict[str, float] = defaultdict(float)
        shared = 0.0
        for r in rows:
            o = r["Tags.team"] or owners.get(r["ResourceName"])
            if o:
                alloc[o] += r["cost"]
            else:
                shared += r["cost"]
        if mode == "even" and alloc:
            alloc = defaultdict(float, {k: v + shared / len(alloc) for k, v in alloc.items()})
        elif mode == "proportional" and alloc:
            total = sum(alloc.values())
            alloc = defaultdict(float, {k: v + shared * v / total for k, v in alloc.items()})
        elif shared:
            alloc["shared"] += shared
        return {"allocations": {k: round(v, 2) for k, v in alloc.items()}}

    def _retiring(self) -> set[str]:
        page = next((t for k, t in self.docs.items() if "decommission" in k), "")
        return set(re.findall(r"^\|\s*([a-z][\w-]*)\s*\|", page, re.M))

    def savings_plan(self) -> dict[str, Any]:
        discount = self.toolbox.call("price_list", section="savings_plan")["savings_plan_discount"]
        skip = self._retiring()
        rows = self.toolbox.call(
            "billing_query",
            group_by=["ServiceName", "ResourceName"],
            granularity="hourly",
            limit=100000,
        )
        hourly: dict[str, float] = defaultdict(float)
        for r in rows:
            if "Compute" in r["ServiceName"] and r["ResourceName"] not in skip:
                hourly[r["period"]] += r["cost"]
        start = datetime.fromisoformat(self.ctx["billing_export"]["period_start"]).replace(
            tzinfo=UTC
        )
        end = datetime.fromisoformat(self.ctx["billing_export"]["period_end"]).replace(tzinfo=UTC)
        hours = int((end - start).total_seconds() // 3600)
        usage = [
            hourly.get((start + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), 0.0)
            for h in range(hours)
        ]
        best, saved = 0.0, 0.0
        for level in sorted(set(round(u, 6) for u in usage)):
            c = level * (1 - discount)
            s = sum(usage) - sum(c + max(0.0, u - level) for u in usage)
            if s > saved:
                best, saved = c, s
        return {"commitment_hourly": round(best, 4)}

    def reserved(self) -> dict[str, Any]:
        skip = self._retiring()
        covered = self.committed()
        rows = self.toolbox.call(
            "billing_query",
            group_by=["ResourceId", "ServiceName"],
            granularity="hourly",
            limit=100000,
        )
        hours: dict[str, int] = defaultdict(int)
        for r in rows:
            if "Compute" in r["ServiceName"]:
                hours[r["ResourceId"]] += 1
        period = self.ctx["billing_export"]
        total = (
            date.fromisoformat(period["period_end"]) - date.fromisoformat(period["period_start"])
        ).days * 24
        recs = []
        for acct in self.accounts:
            for r in self.d("ec2", "DescribeInstances", acct)["Reservations"]:
                for inst in r["Instances"]:
                    iid, tags = inst["InstanceId"], self.tags(inst)
                    if inst["State"]["Name"] != "running" or iid in covered:
                        continue
                    if tags.get("Name") in skip:
                        continue
                    if hours.get(iid, 0) >= total:
                        recs.append({"resource_id": iid, "recommended_type": inst["InstanceType"]})
        return {"incident": bool(recs), "recommendations": recs}


class Heuristic(Agent):
    """The heuristic as an in-process agent."""

    def run(self, task: TaskView, toolbox: Toolbox) -> dict[str, Any] | None:
        return _Run(task, toolbox).run()


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """The ``finops/heuristic`` agent."""
    return [
        AgentSpec(
            "finops/heuristic",
            lambda ctx: Heuristic(),
            "A strong honest FinOps heuristic (handbook numbers, protected tags and names, "
            "first-pass rules); calibration yardstick.",
        )
    ]
