"""The price table shipped as data, used both to generate billing and to score savings."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

#: A gp3 volume's IOPS and throughput (MB/s) included in its GB price.
GP3_IOPS = 3000
GP3_THROUGHPUT = 125
#: A gp2 volume's baseline IOPS per GB (at least 100, at most 16000).
GP2_IOPS_PER_GB = 3


def gp2_iops(size_gb: float) -> float:
    """The baseline IOPS of a gp2 volume of ``size_gb``."""
    return min(16000.0, max(100.0, GP2_IOPS_PER_GB * size_gb))


@dataclass(frozen=True)
class SizedPrice:
    """Hourly price and capacity of one instance type or database class."""

    hourly: float
    vcpu: int
    memory_gib: float


@dataclass(frozen=True)
class PriceTable:
    """List prices of one region (USD)."""

    raw: dict[str, Any]

    @property
    def hours_per_month(self) -> float:
        """Hours in a billing month."""
        return float(self.raw["hours_per_month"])

    @property
    def savings_plan_discount(self) -> float:
        """Discount of a one-year compute savings plan against on-demand."""
        return float(self.raw["savings_plan_discount"])

    @property
    def reserved_discount(self) -> float:
        """Discount of a one-year reserved instance against on-demand."""
        return float(self.raw["reserved_discount"])

    def _sized(self, table: str, name: str) -> SizedPrice:
        try:
            hourly, vcpu, mem = self.raw[table][name]
        except KeyError:
            raise KeyError(f"no {table} price for {name!r}") from None
        return SizedPrice(float(hourly), int(vcpu), float(mem))

    def find_sized(self, table: str, name: str) -> SizedPrice | None:
        """Price and size of ``name`` in ``ec2`` or ``rds``, or None when the table lacks it."""
        entry = self.raw[table].get(name) if isinstance(name, str) else None
        return self._sized(table, name) if entry is not None else None

    def dearest_sized(self, table: str) -> SizedPrice:
        """The price of a type or class ``table`` lacks: its dearest, with no capacity.

        Nothing can be saved by moving to an unlisted type, and no need is met by one.
        """
        return SizedPrice(max(float(v[0]) for v in self.raw[table].values()), 0, 0.0)

    def find_rate(self, table: str, name: str) -> float | None:
        """A flat rate of ``name`` in ``ebs_gb_month`` or ``load_balancer_hour``, or None."""
        entry = self.raw[table].get(name) if isinstance(name, str) else None
        return float(entry) if entry is not None else None

    def dearest_rate(self, table: str) -> float:
        """The rate of a volume or load balancer type ``table`` lacks: its dearest."""
        return max(float(v) for v in self.raw[table].values())

    def instance(self, instance_type: str) -> SizedPrice:
        """Price and size of an EC2 instance type."""
        return self._sized("ec2", instance_type)

    def database(self, instance_class: str) -> SizedPrice:
        """Price and size of an RDS instance class."""
        return self._sized("rds", instance_class)

    def instance_types(self) -> list[str]:
        """Every priced EC2 instance type."""
        return list(self.raw["ec2"])

    def database_classes(self) -> list[str]:
        """Every priced RDS class."""
        return list(self.raw["rds"])

    def volume_month(
        self, volume_type: str, size_gb: float, iops: float = 0, throughput: float = 0
    ) -> float:
        """Monthly price of an EBS volume: size, provisioned IOPS and gp3 throughput."""
        try:
            per_gb = float(self.raw["ebs_gb_month"][volume_type])
        except KeyError:
            raise KeyError(f"no EBS price for volume type {volume_type!r}") from None
        return per_gb * size_gb + self.volume_extras(volume_type, iops, throughput)

    def volume_extras(self, volume_type: str, iops: float, throughput: float) -> float:
        """Monthly price of a volume's provisioned IOPS and throughput beyond its baseline."""
        if volume_type in ("io1", "io2"):
            return iops * float(self.raw["ebs_iops_month"])
        if volume_type == "gp3":
            return max(0.0, iops - GP3_IOPS) * float(self.raw["ebs_gp3_iops_month"]) + max(
                0.0, throughput - GP3_THROUGHPUT
            ) * float(self.raw["ebs_gp3_throughput_month"])
        return 0.0

    def snapshot_month(self, size_gb: float) -> float:
        """Monthly price of a snapshot of ``size_gb``."""
        return float(self.raw["snapshot_gb_month"]) * size_gb

    @property
    def public_ip_hour(self) -> float:
        """Hourly price of a public IPv4 address (Elastic IP)."""
        return float(self.raw["public_ipv4_hour"])

    def load_balancer_hour(self, lb_type: str) -> float:
        """Hourly price of a load balancer."""
        return float(self.raw["load_balancer_hour"][lb_type])

    @property
    def rds_storage_month(self) -> float:
        """Monthly price of one GB of database storage."""
        return float(self.raw["rds_storage_gb_month"])

    @property
    def s3_month(self) -> float:
        """Monthly price of one GB in S3 Standard."""
        return self.s3_class_month("STANDARD")

    def s3_class_month(self, storage_class: str) -> float:
        """Monthly price of one GB in an S3 storage class (an unknown one: Standard's)."""
        table = self.raw["s3_gb_month"]
        return float(table.get(storage_class, table["STANDARD"]))

    @property
    def s3_get(self) -> float:
        """Price of one S3 GET request."""
        return float(self.raw["s3_get_per_1000"]) / 1000

    @property
    def nat_hour(self) -> float:
        """Hourly price of a NAT gateway."""
        return float(self.raw["nat_gateway_hour"])

    @property
    def nat_gb(self) -> float:
        """Price of one GB a NAT gateway processes."""
        return float(self.raw["nat_gateway_gb"])

    @property
    def inter_az_gb(self) -> float:
        """Price of one GB sent to another availability zone."""
        return float(self.raw["data_transfer_inter_az_gb"])

    @property
    def transfer_gb(self) -> float:
        """Price of one GB of data transfer out."""
        return float(self.raw["data_transfer_out_gb"])

    def service_name(self, key: str) -> str:
        """Cost Explorer SERVICE name of a service key (``ec2_compute``, ``rds``, ...)."""
        return str(self.raw["services"][key]["name"])

    def service_key(self, text: str) -> str | None:
        """The service key that ``text`` names (its official name or a common alias)."""
        t = " ".join(text.lower().replace("_", " ").split())
        for key, entry in self.raw["services"].items():
            names = [entry["name"].lower(), key.replace("_", " "), *entry["aliases"]]
            if t in names:
                return str(key)
        return None


@functools.cache
def load_prices() -> PriceTable:
    """The shipped price table."""
    text = resources.files("itbench_finops").joinpath("data/prices.yaml").read_text()
    return PriceTable(yaml.safe_load(text))
