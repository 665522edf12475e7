"""VPC flow log records of a NAT gateway's interface, consistent with its processed data.

The records use a custom flow log format with the destination's AWS service
(``pkt-dst-aws-service``), the way teams find out where NAT traffic goes. One record per hour
and destination over the last two days, the bytes split as the scenario's ``s3_share`` says.
"""

from __future__ import annotations

import random
import zlib
from datetime import timedelta
from typing import Any

from itbench_finops.server import MANAGEMENT_ACCOUNT
from itbench_finops.spec import FinOpsSpec, Instance, NatGateway
from itbench_finops.timeline import Timeline

#: The fields of each record, in order (the log stream's format).
FORMAT = (
    "version account-id interface-id srcaddr dstaddr srcport dstport protocol packets bytes "
    "start end action log-status pkt-dst-aws-service"
)
#: Hours of records written (the most recent ones).
HOURS = 48
#: Each region's S3 addresses: the first two octets and the third's lowest value, of a /17
#: (the handbook's network page lists the ranges).
S3_RANGES = {"us-east-1": ("52.216", 0), "eu-west-1": ("52.218", 0), "us-west-2": ("52.218", 128)}
#: Destinations other than S3: (address, service).
_ELSEWHERE = (("34.223.12.8", "AMAZON"), ("140.82.112.4", "-"), ("151.101.1.69", "-"))


def flow_records(
    r: NatGateway, eni: str, spec: FinOpsSpec, timeline: Timeline, seed: int
) -> list[dict[str, Any]]:
    """The log events of the NAT gateway ``r`` (interface ``eni``), oldest first."""
    rng = random.Random(seed ^ zlib.crc32(r.name.encode()))
    account = r.account or MANAGEMENT_ACCOUNT
    sources = [
        f"172.31.{96 + k}.{10 + k}"
        for k, i in enumerate(x for x in spec.resources if isinstance(x, Instance))
        if i.nat == r.name
    ] or ["172.31.96.10"]
    events = timeline.of(r.name)
    out = []
    for h in range(HOURS, 0, -1):
        start = timeline.now - timedelta(hours=h)
        if start < events.created:
            continue
        gb = (r.gb_day + timeline.spike_extra(r, start)) / 24
        head, low = S3_RANGES[r.s3_region]
        s3 = f"{head}.{low + rng.randint(0, 127)}.{rng.randint(1, 254)}"
        shares = [(s3, "S3", r.s3_share)]
        rest = 1 - r.s3_share
        picks = rng.sample(_ELSEWHERE, 2)
        shares += [(addr, svc, rest * w) for (addr, svc), w in zip(picks, (0.7, 0.3), strict=True)]
        for addr, service, share in shares:
            size = int(gb * share * 1e9 * rng.uniform(0.9, 1.1))
            if size <= 0:
                continue
            begin = int(start.timestamp())
            message = " ".join(
                str(v)
                for v in (
                    5,
                    account,
                    eni,
                    rng.choice(sources),
                    addr,
                    rng.randint(32768, 60999),
                    443,
                    6,
                    max(1, size // 1400),
                    size,
                    begin,
                    begin + 3600,
                    "ACCEPT",
                    "OK",
                    service,
                )
            )
            out.append({"timestamp": (begin + 3599) * 1000, "message": message})
    return out
