"""The Price List API (``pricing``) answered from the domain's price table.

moto does not emulate the Price List API; the endpoint answers ``DescribeServices``,
``GetAttributeValues`` and ``GetProducts`` itself, with products built from
``data/prices.yaml`` in the Price List's own shape (``FormatVersion: aws_v1``, each product a
JSON document with its attributes and on-demand terms), so ``aws pricing get-products`` and
boto3's ``pricing`` client read the same prices the bill and the scorer use.

Pure functions over the price table (no moto): the endpoint installs them, tests call them.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from itbench_finops.prices import PriceTable, load_prices

#: The JSON target prefix of the Price List API.
TARGET = "AWSPriceListService."
#: Most products in one page of ``GetProducts`` (its default and limit).
PAGE = 100
_EFFECTIVE = "2026-01-01T00:00:00Z"
_ONDEMAND = "JRTCKXETXF"
_RATE = "6YS6EN2CT7"
_S3_CLASSES = {
    "STANDARD": ("General Purpose", "Standard", "TimedStorage-ByteHrs"),
    "STANDARD_IA": (
        "Infrequent Access",
        "Standard - Infrequent Access",
        "TimedStorage-SIA-ByteHrs",
    ),
    "GLACIER_IR": (
        "Archive Instant Retrieval",
        "Glacier Instant Retrieval",
        "TimedStorage-GIR-ByteHrs",
    ),
    "GLACIER": ("Archive", "Amazon Glacier", "TimedStorage-GlacierByteHrs"),
    "DEEP_ARCHIVE": ("Archive", "Glacier Deep Archive", "TimedStorage-GDA-ByteHrs"),
}
_EBS_NAMES = {
    "gp2": "General Purpose",
    "gp3": "General Purpose",
    "io1": "Provisioned IOPS",
    "io2": "Provisioned IOPS",
    "st1": "Throughput Optimized HDD",
    "sc1": "Cold HDD",
    "standard": "Magnetic",
}


class PricingError(ValueError):
    """A request the Price List API refuses: ``code`` is the AWS error code."""

    def __init__(self, message: str, code: str = "InvalidParameterException") -> None:
        super().__init__(message)
        self.code = code


def _sku(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16].upper()


def _product(
    service: str, family: str, attrs: dict[str, str], unit: str, price: float, text: str
) -> dict[str, Any]:
    sku = _sku(service, family, *sorted(f"{k}={v}" for k, v in attrs.items()))
    term = f"{sku}.{_ONDEMAND}"
    return {
        "product": {
            "productFamily": family,
            "attributes": {"servicecode": service, **attrs},
            "sku": sku,
        },
        "serviceCode": service,
        "terms": {
            "OnDemand": {
                term: {
                    "priceDimensions": {
                        f"{term}.{_RATE}": {
                            "unit": unit,
                            "endRange": "Inf",
                            "description": text,
                            "appliesTo": [],
                            "rateCode": f"{term}.{_RATE}",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{price:.10f}"},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": _EFFECTIVE,
                    "offerTermCode": _ONDEMAND,
                    "termAttributes": {},
                }
            }
        },
        "version": "20260101000000",
        "publicationDate": _EFFECTIVE,
    }


def products(prices: PriceTable) -> list[dict[str, Any]]:
    """Every product of the price table, in the Price List's shape."""
    raw = prices.raw
    where = {"location": str(raw["region_name"]), "regionCode": str(raw["region"])}
    out = []
    for itype, (hourly, vcpu, mem) in raw["ec2"].items():
        out.append(
            _product(
                "AmazonEC2",
                "Compute Instance",
                {
                    **where,
                    "instanceType": itype,
                    "instanceFamily": "General purpose",
                    "vcpu": str(vcpu),
                    "memory": f"{mem:g} GiB",
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                    "licenseModel": "No License required",
                    "usagetype": f"BoxUsage:{itype}",
                    "operation": "RunInstances",
                },
                "Hrs",
                float(hourly),
                f"${hourly} per On Demand Linux {itype} Instance Hour",
            )
        )
    for vtype, rate in raw["ebs_gb_month"].items():
        out.append(
            _product(
                "AmazonEC2",
                "Storage",
                {
                    **where,
                    "volumeApiName": vtype,
                    "volumeType": _EBS_NAMES.get(vtype, vtype),
                    "usagetype": f"EBS:VolumeUsage.{vtype}",
                    "operation": "",
                },
                "GB-Mo",
                float(rate),
                f"${rate} per GB-month of {vtype} provisioned storage",
            )
        )
    for name, key, unit, usage in (
        ("io1", "ebs_iops_month", "IOPS-Mo", "EBS:VolumeP-IOPS.piops"),
        ("gp3", "ebs_gp3_iops_month", "IOPS-Mo", "EBS:VolumeP-IOPS.gp3"),
        ("gp3", "ebs_gp3_throughput_month", "GiBps-mo", "EBS:VolumeP-Throughput.gp3"),
    ):
        out.append(
            _product(
                "AmazonEC2",
                "System Operation" if "IOPS" in unit else "Provisioned Throughput",
                {**where, "volumeApiName": name, "usagetype": usage, "group": "EBS IOPS"},
                unit,
                float(raw[key]),
                f"${raw[key]} per {unit} above the baseline of {name}",
            )
        )
    flat = (
        ("Storage Snapshot", "EBS:SnapshotUsage", "GB-Mo", raw["snapshot_gb_month"]),
        ("IP Address", "PublicIPv4:InUseAddress", "Hrs", raw["public_ipv4_hour"]),
        ("IP Address", "PublicIPv4:IdleAddress", "Hrs", raw["public_ipv4_hour"]),
        ("NAT Gateway", "NatGateway-Hours", "Hrs", raw["nat_gateway_hour"]),
        ("NAT Gateway", "NatGateway-Bytes", "GB", raw["nat_gateway_gb"]),
        ("Data Transfer", "DataTransfer-Regional-Bytes", "GB", raw["data_transfer_inter_az_gb"]),
        ("Data Transfer", "DataTransfer-Out-Bytes", "GB", raw["data_transfer_out_gb"]),
    )
    for family, usage, unit, rate in flat:
        out.append(
            _product(
                "AmazonEC2",
                family,
                {**where, "usagetype": usage},
                unit,
                float(rate),
                f"${rate} per {unit} of {usage}",
            )
        )
    for cls, (hourly, vcpu, mem) in raw["rds"].items():
        out.append(
            _product(
                "AmazonRDS",
                "Database Instance",
                {
                    **where,
                    "instanceType": cls,
                    "vcpu": str(vcpu),
                    "memory": f"{mem:g} GiB",
                    "databaseEngine": "PostgreSQL",
                    "deploymentOption": "Single-AZ",
                    "usagetype": f"InstanceUsage:{cls}",
                },
                "Hrs",
                float(hourly),
                f"${hourly} per {cls} Single-AZ instance hour running PostgreSQL",
            )
        )
    out.append(
        _product(
            "AmazonRDS",
            "Database Storage",
            {**where, "volumeType": "General Purpose", "usagetype": "RDS:GP2-Storage"},
            "GB-Mo",
            float(raw["rds_storage_gb_month"]),
            "per GB-month of provisioned gp2 storage",
        )
    )
    for cls, rate in raw["s3_gb_month"].items():
        family, volume, usage = _S3_CLASSES.get(cls, ("Storage", cls, f"TimedStorage-{cls}"))
        out.append(
            _product(
                "AmazonS3",
                "Storage",
                {**where, "storageClass": family, "volumeType": volume, "usagetype": usage},
                "GB-Mo",
                float(rate),
                f"${rate} per GB-month in {volume}",
            )
        )
    out.append(
        _product(
            "AmazonS3",
            "API Request",
            {**where, "group": "S3-API-Tier2", "usagetype": "Requests-Tier2"},
            "Requests",
            float(raw["s3_get_per_1000"]) / 1000,
            "per GET request",
        )
    )
    lb_family = {
        "application": "Load Balancer-Application",
        "network": "Load Balancer-Network",
        "gateway": "Load Balancer-Gateway",
        "classic": "Load Balancer",
    }
    for lb, rate in raw["load_balancer_hour"].items():
        out.append(
            _product(
                "AWSELB",
                lb_family.get(lb, "Load Balancer"),
                {**where, "usagetype": "LoadBalancerUsage", "operation": f"LoadBalancing:{lb}"},
                "Hrs",
                float(rate),
                f"${rate} per {lb} load balancer hour",
            )
        )
    return out


@cache
def catalog() -> tuple[dict[str, Any], ...]:
    """The shipped price table's products (built once per process)."""
    return tuple(products(load_prices()))


def _attribute_names(items: tuple[dict[str, Any], ...], service: str) -> list[str]:
    names: set[str] = set()
    for p in items:
        if p["serviceCode"] == service:
            names.update(p["product"]["attributes"])
    return sorted(names)


def describe_services(params: dict[str, Any]) -> dict[str, Any]:
    """``DescribeServices``: the service codes and their attribute names."""
    items = catalog()
    codes = sorted({p["serviceCode"] for p in items})
    wanted = params.get("ServiceCode")
    if wanted:
        codes = [c for c in codes if c == wanted]
    return {
        "Services": [
            {"ServiceCode": c, "AttributeNames": _attribute_names(items, c)} for c in codes
        ],
        "FormatVersion": "aws_v1",
    }


def get_attribute_values(params: dict[str, Any]) -> dict[str, Any]:
    """``GetAttributeValues``: the values one attribute takes in one service."""
    service, name = params.get("ServiceCode"), params.get("AttributeName")
    if not service or not name:
        raise PricingError("ServiceCode and AttributeName are required")
    values = sorted(
        {
            str(p["product"]["attributes"][name])
            for p in catalog()
            if p["serviceCode"] == service and name in p["product"]["attributes"]
        }
    )
    return {"AttributeValues": [{"Value": v} for v in values]}


def _test(kind: str, have: str | None, value: str) -> bool:
    if have is None:
        return False
    if kind in ("TERM_MATCH", "EQUALS"):
        return have.lower() == value.lower()
    if kind == "CONTAINS":
        return value.lower() in have.lower()
    options = [v.strip().lower() for v in value.split(",")]
    if kind == "ANY_OF":
        return have.lower() in options
    if kind == "NONE_OF":
        return have.lower() not in options
    raise PricingError(
        f"Filter Type {kind!r} is invalid (valid: TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF)"
    )


def get_products(params: dict[str, Any]) -> dict[str, Any]:
    """``GetProducts``: the products of a service that match every filter, a page at a time."""
    service = params.get("ServiceCode")
    if not service:
        raise PricingError("ServiceCode is required")
    filters = params.get("Filters") or []
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
        raise PricingError("Filters must be a list of {Type, Field, Value}")
    for f in filters:
        _test(str(f.get("Type", "TERM_MATCH")), "", "")  # refuses an unknown type up front
    try:
        size = int(params.get("MaxResults") or PAGE)
        offset = int(params.get("NextToken") or 0)
    except (TypeError, ValueError):
        raise PricingError("MaxResults and NextToken must be numbers") from None
    if not 1 <= size <= PAGE:
        raise PricingError(f"MaxResults must be between 1 and {PAGE}")
    found = []
    for p in catalog():
        if p["serviceCode"] != service:
            continue
        attrs = {k.lower(): str(v) for k, v in p["product"]["attributes"].items()}
        attrs["productfamily"] = p["product"]["productFamily"]
        if all(
            _test(
                str(f.get("Type", "TERM_MATCH")),
                attrs.get(str(f.get("Field", "")).lower()),
                str(f.get("Value", "")),
            )
            for f in filters
        ):
            found.append(p)
    page = found[offset : offset + size]
    out: dict[str, Any] = {
        "FormatVersion": "aws_v1",
        "PriceList": [json.dumps(p) for p in page],
    }
    if offset + size < len(found):
        out["NextToken"] = str(offset + size)
    return out


#: Operations by their JSON target's name.
OPERATIONS = {
    "DescribeServices": describe_services,
    "GetAttributeValues": get_attribute_values,
    "GetProducts": get_products,
}


def answer(target: str, body: bytes) -> tuple[str, bytes]:
    """The HTTP status and JSON body of one Price List request (``X-Amz-Target``)."""
    operation = OPERATIONS.get(target[len(TARGET) :])
    if operation is None:
        code, message = "UnknownOperationException", f"{target} is not supported here"
        return "400 Bad Request", json.dumps({"__type": code, "message": message}).encode()
    try:
        params = json.loads(body or b"{}")
        if not isinstance(params, dict):
            raise PricingError("the request body must be a JSON object")
        return "200 OK", json.dumps(operation(params)).encode()
    except json.JSONDecodeError:
        code, message = "SerializationException", "the request body is not JSON"
    except PricingError as exc:
        code, message = exc.code, str(exc)
    return "400 Bad Request", json.dumps({"__type": code, "message": message}).encode()
