"""Cloud account posture checks (CIS AWS Foundations style) on a moto-served AWS account.

An account is described by a plan (buckets, security groups, volumes, users, trails, keys,
password policy) that :func:`seed` creates through the AWS API. Every check has a predicate
on the plan (ground truth), mutations that make a clean account violate, near misses, the
evidence sections its reference collector gathers and reference Rego over that evidence.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from itbench_ciso.checks.base import Check, Variant, rotated

Plan = dict[str, Any]
Mutation = Callable[[Plan], None]

PUBLIC_ACLS = ("public-read", "public-read-write", "authenticated-read")
#: The account's second region.
OTHER_REGION = "eu-west-1"
#: The regions every account operates in (the task context names them).
REGIONS = ("us-east-1", OTHER_REGION)
#: The AWS services an account plan uses (their moto backends are loaded ahead of judging).
SERVICES = ("s3", "ec2", "iam", "cloudtrail", "sts")
#: Event selectors of a trail that records every management event.
ALL_MANAGEMENT = [{"ReadWriteType": "All", "IncludeManagementEvents": True}]
FULL_BLOCK = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}


def _bucket(name: str, **kw: Any) -> dict[str, Any]:
    base = {
        "name": name,
        "acl": "private",
        "block_public": {
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
        "encryption": "aws:kms",
        "versioning": "Enabled",
    }
    base.update(kw)
    return base


def clean_account() -> Plan:
    """An account plan that satisfies every check of the library."""
    return {
        "buckets": [_bucket("app-assets"), _bucket("audit-logs"), _bucket("trail-logs")],
        "security_groups": [
            {
                "name": "web-frontend",
                "rules": [
                    {"proto": "tcp", "from": 443, "to": 443, "cidr": "0.0.0.0/0"},
                    {"proto": "tcp", "from": 80, "to": 80, "cidr": "0.0.0.0/0"},
                ],
            },
            {
                "name": "bastion",
                "rules": [{"proto": "tcp", "from": 22, "to": 22, "cidr": "10.20.0.0/16"}],
            },
            {
                "name": "database",
                "rules": [{"proto": "tcp", "from": 5432, "to": 5432, "cidr": "10.20.0.0/16"}],
            },
        ],
        "volumes": [{"size": 20, "encrypted": True}, {"size": 100, "encrypted": True}],
        "ebs_default_encryption": True,
        "users": [
            {"name": "alice", "console": True, "mfa": True, "keys": ["Active"]},
            {"name": "bob", "console": True, "mfa": True, "keys": []},
            {"name": "ci-deployer", "console": False, "mfa": False, "keys": ["Active"]},
        ],
        "password_policy": {"MinimumPasswordLength": 14, "RequireSymbols": True},
        "trails": [{"name": "org-trail", "multi_region": True, "logging": True}],
        # Resources of a second region the account uses.
        "regions": {
            OTHER_REGION: {
                "security_groups": [
                    {
                        "name": "replica-web",
                        "rules": [{"proto": "tcp", "from": 443, "to": 443, "cidr": "0.0.0.0/0"}],
                    }
                ],
                "volumes": [{"size": 50, "encrypted": True}],
                "ebs_default_encryption": True,
            }
        },
    }


# --- seeding ---------------------------------------------------------------------------------


def seed(clients: Callable[..., Any], plan: Plan, suffix: str) -> None:
    """Create ``plan`` in the account the ``clients`` factory talks to.

    Args:
        clients: (service name, region) -> boto3 client of the account (the region defaults
            to the endpoint's).
        plan: The account plan.
        suffix: Appended to bucket names (bucket names are global).
    """
    s3 = clients("s3")
    for b in plan["buckets"]:
        name = f"{b['name']}-{suffix}"
        s3.create_bucket(Bucket=name)
        if b["acl"] != "private":
            s3.put_bucket_acl(Bucket=name, ACL=b["acl"])
        if b["block_public"] is not None:
            s3.put_public_access_block(
                Bucket=name, PublicAccessBlockConfiguration=b["block_public"]
            )
        if b["encryption"] is not None:
            rule: dict[str, Any] = {"SSEAlgorithm": b["encryption"]}
            if b["encryption"].startswith("aws:kms") and b.get("kms_key"):
                rule["KMSMasterKeyID"] = b["kms_key"]
            s3.put_bucket_encryption(
                Bucket=name,
                ServerSideEncryptionConfiguration={
                    "Rules": [{"ApplyServerSideEncryptionByDefault": rule}]
                },
            )
        if b["versioning"] is not None:
            s3.put_bucket_versioning(
                Bucket=name, VersioningConfiguration={"Status": b["versioning"]}
            )
        if b.get("tags"):
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": _tag_set(b["tags"])})
        for key, text in (b.get("objects") or {}).items():
            s3.put_object(Bucket=name, Key=key, Body=text.replace("{suffix}", suffix).encode())
    _seed_region(clients("ec2"), plan)
    for region, extra in plan.get("regions", {}).items():
        _seed_region(clients("ec2", region), extra)
    iam = clients("iam")
    for u in plan["users"]:
        iam.create_user(UserName=u["name"])
        if u.get("tags"):
            iam.tag_user(UserName=u["name"], Tags=_tag_set(u["tags"]))
        if u["console"]:
            iam.create_login_profile(UserName=u["name"], Password="Corr3ct-Horse-Battery!")
        if u["mfa"]:
            serial = iam.create_virtual_mfa_device(VirtualMFADeviceName=u["name"])[
                "VirtualMFADevice"
            ]["SerialNumber"]
            iam.enable_mfa_device(
                UserName=u["name"],
                SerialNumber=serial,
                AuthenticationCode1="123456",
                AuthenticationCode2="654321",
            )
        for status in u["keys"]:
            key = iam.create_access_key(UserName=u["name"])["AccessKey"]["AccessKeyId"]
            if status != "Active":
                iam.update_access_key(UserName=u["name"], AccessKeyId=key, Status=status)
    if plan["password_policy"] is not None:
        iam.update_account_password_policy(**plan["password_policy"])
    trail_bucket = f"trail-logs-{suffix}"
    ct = clients("cloudtrail")
    for t in plan["trails"]:
        extra = {"KmsKeyId": t["kms_key"]} if t.get("kms_key") else {}
        ct.create_trail(
            Name=t["name"],
            S3BucketName=trail_bucket,
            IsMultiRegionTrail=t["multi_region"],
            **extra,
        )
        ct.put_event_selectors(
            TrailName=t["name"], EventSelectors=t.get("selectors", ALL_MANAGEMENT)
        )
        if t["logging"]:
            ct.start_logging(Name=t["name"])


def seed_accounts(accounts: list[dict[str, Any]]) -> None:
    """Create accounts, each ``{"account": id, "plan": plan, "suffix": suffix}``, in-process.

    Called inside a standby endpoint (see :mod:`itbench.aws_server`), where boto3 reaches the
    server's own backends: the hidden accounts are made during the agent's turn, in a server
    that binds its port only once the agent's endpoint is gone. One set of clients serves every
    account, each call naming its account in moto's account header (which only the harness
    may use once the server listens).
    """
    import boto3  # type: ignore[import-untyped]

    session = boto3.session.Session(region_name=REGIONS[0])
    current = {"account": ""}

    def name_the_account(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = current["account"]

    session.events.register("before-sign", name_the_account)
    made: dict[tuple[str, str], Any] = {}

    def clients(service: str, region: str = REGIONS[0]) -> Any:
        if (service, region) not in made:
            made[service, region] = session.client(service, region_name=region)
        return made[service, region]

    for item in accounts:
        current["account"] = item["account"]
        seed(clients, item["plan"], item["suffix"])


def _tag_set(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _seed_region(ec2: Any, part: Plan) -> None:
    """Security groups, volumes and the EBS default of one region."""
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    for sg in part["security_groups"]:
        tagged = (
            {
                "TagSpecifications": [
                    {"ResourceType": "security-group", "Tags": _tag_set(sg["tags"])}
                ]
            }
            if sg.get("tags")
            else {}
        )
        gid = ec2.create_security_group(
            GroupName=sg["name"], Description=f"{sg['name']} tier", VpcId=vpc, **tagged
        )["GroupId"]
        perms = []
        unique = {tuple(sorted(r.items())): r for r in sg["rules"]}
        for r in unique.values():
            perm: dict[str, Any] = {"IpProtocol": r["proto"]}
            if r["proto"] != "-1":
                perm.update(FromPort=r["from"], ToPort=r["to"])
            if ":" in r["cidr"]:
                perm["Ipv6Ranges"] = [{"CidrIpv6": r["cidr"]}]
            else:
                perm["IpRanges"] = [{"CidrIp": r["cidr"]}]
            perms.append(perm)
        if perms:
            ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=perms)
    for v in part["volumes"]:
        zone = f"{ec2.meta.region_name}a"
        ec2.create_volume(AvailabilityZone=zone, Size=v["size"], Encrypted=v["encrypted"])
    if part["ebs_default_encryption"]:
        ec2.enable_ebs_encryption_by_default()


# --- reference collector -----------------------------------------------------------------------

_COLLECT: dict[str, str] = {
    "buckets": """
def collect_buckets():
    s3 = boto3.client("s3")
    out = []
    for b in s3.list_buckets()["Buckets"]:
        name = b["Name"]
        entry = {"name": name}
        grants = s3.get_bucket_acl(Bucket=name)["Grants"]
        entry["grants"] = [
            {"uri": g["Grantee"].get("URI"), "permission": g["Permission"]} for g in grants
        ]
        try:
            entry["public_access_block"] = s3.get_public_access_block(Bucket=name)[
                "PublicAccessBlockConfiguration"
            ]
        except ClientError:
            entry["public_access_block"] = None
        try:
            rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
            entry["sse"] = [r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in rules]
            entry["sse_rules"] = [
                {"algorithm": r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"],
                 "kms_key": r["ApplyServerSideEncryptionByDefault"].get("KMSMasterKeyID")}
                for r in rules
            ]
        except ClientError:
            entry["sse"] = []
            entry["sse_rules"] = []
        entry["versioning"] = s3.get_bucket_versioning(Bucket=name).get("Status")
        out.append(entry)
    return out
""",
    "security_groups": """
def collect_security_groups():
    out = []
    for region in regions():
      ec2 = boto3.client("ec2", region_name=region)
      for sg in ec2.describe_security_groups()["SecurityGroups"]:
        rules = []
        for p in sg.get("IpPermissions", []):
            rules.append({
                "protocol": p["IpProtocol"],
                "from_port": p.get("FromPort"),
                "to_port": p.get("ToPort"),
                "cidrs": [r["CidrIp"] for r in p.get("IpRanges", [])]
                + [r["CidrIpv6"] for r in p.get("Ipv6Ranges", [])],
            })
        out.append({"id": sg["GroupId"], "name": sg["GroupName"], "region": region,
                    "ingress": rules})
    return out
""",
    "volumes": """
def collect_volumes():
    return [{"id": v["VolumeId"], "region": region, "encrypted": v["Encrypted"]}
            for region in regions()
            for v in boto3.client("ec2", region_name=region).describe_volumes()["Volumes"]]
""",
    "ebs_default": """
def collect_ebs_default():
    return {region: boto3.client("ec2", region_name=region)
            .get_ebs_encryption_by_default()["EbsEncryptionByDefault"]
            for region in regions()}
""",
    "users": """
def collect_users():
    iam = boto3.client("iam")
    out = []
    for u in iam.list_users()["Users"]:
        name = u["UserName"]
        try:
            iam.get_login_profile(UserName=name)
            console = True
        except ClientError:
            console = False
        out.append({
            "name": name,
            "console": console,
            "mfa_devices": len(iam.list_mfa_devices(UserName=name)["MFADevices"]),
            "access_keys": [k["Status"] for k in iam.list_access_keys(UserName=name)["AccessKeyMetadata"]],
        })
    return out
""",
    "password_policy": """
def collect_password_policy():
    try:
        return boto3.client("iam").get_account_password_policy()["PasswordPolicy"]
    except ClientError:
        return None
""",
    "trails": """
def collect_trails():
    ct = boto3.client("cloudtrail")
    out = []
    for t in ct.describe_trails()["trailList"]:
        status = ct.get_trail_status(Name=t["TrailARN"])
        selectors = ct.get_event_selectors(TrailName=t["TrailARN"]).get("EventSelectors", [])
        out.append({"name": t["Name"], "multi_region": t.get("IsMultiRegionTrail", False),
                    "logging": status.get("IsLogging", False), "selectors": selectors,
                    "kms_key": t.get("KmsKeyId")})
    return out
""",
}


def collector_for(sections: tuple[str, ...]) -> str:
    """A Python evidence collector for ``sections`` (reads the endpoint from the environment)."""
    funcs = "".join(_COLLECT[s] for s in sections)
    calls = ",\n".join(f'        "{s}": collect_{s}()' for s in sections)
    return (
        '"""Collect account evidence with boto3; the endpoint comes from AWS_ENDPOINT_URL."""\n\n'
        "import json\n\nimport boto3\nfrom botocore.exceptions import ClientError\n\n\n"
        "\n\n"
        f"def regions():\n    return {list(REGIONS)!r}\n"
        f"{funcs}\n\n"
        'if __name__ == "__main__":\n'
        f"    print(json.dumps({{\n{calls},\n    }}))\n"
    )


# --- checks --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CloudCheck(Check):
    """An account check.

    Attributes:
        violates: Ground-truth predicate on a plan.
        bad: Mutations that make a clean plan violate.
        near: Mutations that comply but look close.
        sections: Evidence sections the reference collector gathers.
    """

    family: ClassVar[str] = "cloud"
    violates: Callable[[Plan], bool] = field(default=lambda plan: False)
    bad: dict[str, Mutation] = field(default_factory=dict)
    near: dict[str, Mutation] = field(default_factory=dict)
    sections: tuple[str, ...] = ()

    def collector(self) -> str:
        """The reference collector."""
        return collector_for(self.sections)


def _set_bucket(i: int, **kw: Any) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan["buckets"][i].update(kw)

    return mutate


def _add_bucket(name: str, **kw: Any) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan["buckets"].append(_bucket(name, **kw))

    return mutate


def _rule(proto: str, lo: int, hi: int, cidr: str, group: int = 0) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan["security_groups"][group]["rules"].append(
            {"proto": proto, "from": lo, "to": hi, "cidr": cidr}
        )

    return mutate


def _both(*muts: Mutation) -> Mutation:
    def mutate(plan: Plan) -> None:
        for m in muts:
            m(plan)

    return mutate


def _set(key: str, value: Any) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan[key] = copy.deepcopy(value)

    return mutate


def _append(key: str, value: Any) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan[key].append(copy.deepcopy(value))

    return mutate


def _region(key: str, value: Any = None, append: Any = None) -> Mutation:
    """Set (or append to) a field of the account's second region."""

    def mutate(plan: Plan) -> None:
        part = plan["regions"][OTHER_REGION]
        if append is not None:
            part[key].append(copy.deepcopy(append))
        else:
            part[key] = copy.deepcopy(value)

    return mutate


def _region_rule(proto: str, lo: int, hi: int, cidr: str) -> Mutation:
    return _region(
        "security_groups",
        append={
            "name": "replica-admin",
            "rules": [{"proto": proto, "from": lo, "to": hi, "cidr": cidr}],
        },
    )


def _ebs_ok(plan: Plan) -> bool:
    parts = [plan, *plan.get("regions", {}).values()]
    return all(
        all(v["encrypted"] for v in part["volumes"])
        and (part["ebs_default_encryption"] or not part["volumes"])
        for part in parts
    )


def _records_management(trail: dict[str, Any]) -> bool:
    kinds = {
        s["ReadWriteType"]
        for s in trail.get("selectors", ALL_MANAGEMENT)
        if s.get("IncludeManagementEvents", True)
    }
    return "All" in kinds or {"ReadOnly", "WriteOnly"} <= kinds


def _blocked(plan: Plan, bucket: dict[str, Any]) -> bool:
    config = bucket["block_public"]
    return config is not None and all(config.get(k) for k in FULL_BLOCK)


def _edit(key: str, i: int, **kw: Any) -> Mutation:
    def mutate(plan: Plan) -> None:
        plan[key][i].update(kw)

    return mutate


def _all_groups(plan: Plan) -> list[dict[str, Any]]:
    groups = list(plan["security_groups"])
    for part in plan.get("regions", {}).values():
        groups += part["security_groups"]
    return groups


def _open(port: int) -> Callable[[Plan], bool]:
    def pred(plan: Plan) -> bool:
        for sg in _all_groups(plan):
            for r in sg["rules"]:
                if r["cidr"] not in ("0.0.0.0/0", "::/0"):
                    continue
                if r["proto"] == "-1" or (r["proto"] == "tcp" and r["from"] <= port <= r["to"]):
                    return True
        return False

    return pred


def _ports_open(plan: Plan) -> bool:
    return _open(22)(plan) or _open(3389)(plan)


_PORTS_REGO = """violations contains sg.id if {
	some sg in input.security_groups
	some rule in sg.ingress
	some cidr in rule.cidrs
	cidr in {"0.0.0.0/0", "::/0"}
	some port in [22, 3389]
	covers(rule, port)
}

covers(rule, port) if rule.protocol == "-1"

covers(rule, port) if {
	rule.protocol in {"tcp", "6"}
	rule.from_port <= port
	port <= rule.to_port
}"""


def _trail_ok(plan: Plan) -> bool:
    return any(
        t["multi_region"] and t["logging"] and _records_management(t) for t in plan["trails"]
    )


CHECKS: list[CloudCheck] = [
    CloudCheck(
        id="cloud-s3-public-acl",
        title="No S3 bucket readable or writable by everyone through its ACL",
        requirement=(
            "Ensure S3 bucket ACLs grant no access to everyone or to any authenticated AWS "
            "user: no bucket ACL may grant a permission to the AllUsers or AuthenticatedUsers "
            "groups."
        ),
        rego="""violations contains b.name if {
	some b in input.buckets
	some g in b.grants
	g.uri in {
		"http://acs.amazonaws.com/groups/global/AllUsers",
		"http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
	}
}""",
        violates=lambda p: any(b["acl"] in PUBLIC_ACLS for b in p["buckets"]),
        sections=("buckets",),
        bad={
            "public-read bucket": _set_bucket(0, acl="public-read"),
            "authenticated-read bucket": _set_bucket(1, acl="authenticated-read"),
            "new public-read-write bucket": _add_bucket("upload-drop", acl="public-read-write"),
            "public-read-write trail bucket": _set_bucket(2, acl="public-read-write"),
        },
        near={
            "log-delivery-write ACL": _set_bucket(1, acl="log-delivery-write"),
            "no public access block, private ACL": _set_bucket(0, block_public=None),
            "a new private bucket": _add_bucket("exports"),
            "versioning suspended on a private bucket": _set_bucket(0, versioning="Suspended"),
        },
    ),
    CloudCheck(
        id="cloud-s3-public-access-block",
        title="S3 public access block on every bucket",
        requirement=(
            "Ensure that S3 buckets are configured with Block public access (bucket settings) "
            "(CIS AWS 2.1.4): every bucket must have all four public access block settings on."
        ),
        rego="""violations contains b.name if {
	some b in input.buckets
	not full(b.public_access_block)
}

full(c) if {
	c.BlockPublicAcls == true
	c.IgnorePublicAcls == true
	c.BlockPublicPolicy == true
	c.RestrictPublicBuckets == true
}""",
        violates=lambda p: any(not _blocked(p, b) for b in p["buckets"]),
        sections=("buckets",),
        bad={
            "no configuration": _set_bucket(1, block_public=None),
            "policy not blocked": _set_bucket(
                0,
                block_public={
                    "BlockPublicAcls": True,
                    "IgnorePublicAcls": True,
                    "BlockPublicPolicy": False,
                    "RestrictPublicBuckets": True,
                },
            ),
            "new bucket without configuration": _add_bucket("exports", block_public=None),
            "public ACLs not ignored on a new bucket": _add_bucket(
                "uploads",
                block_public={
                    "BlockPublicAcls": True,
                    "IgnorePublicAcls": False,
                    "BlockPublicPolicy": True,
                    "RestrictPublicBuckets": True,
                },
            ),
        },
        near={
            "public-read ACL but fully blocked": _set_bucket(0, acl="public-read"),
            "unencrypted but fully blocked": _set_bucket(2, encryption=None),
            "a new fully blocked bucket": _add_bucket("reports"),
            "versioning suspended but fully blocked": _set_bucket(1, versioning="Suspended"),
        },
    ),
    CloudCheck(
        id="cloud-s3-encryption-kms",
        title="S3 default encryption with KMS",
        requirement=(
            "Ensure all S3 buckets employ encryption at rest with AWS KMS keys: every bucket's "
            "default encryption must be SSE-KMS."
        ),
        rego="""violations contains b.name if {
	some b in input.buckets
	not kms(b)
}

kms(b) if {
	some algorithm in b.sse
	algorithm in {"aws:kms", "aws:kms:dsse"}
}""",
        violates=lambda p: any(
            b["encryption"] not in ("aws:kms", "aws:kms:dsse") for b in p["buckets"]
        ),
        sections=("buckets",),
        bad={
            "AES256": _set_bucket(0, encryption="AES256"),
            "no default encryption": _set_bucket(1, encryption=None),
            "new bucket with AES256": _add_bucket("cache", encryption="AES256"),
            "trail bucket with AES256": _set_bucket(2, encryption="AES256"),
        },
        near={
            "aws:kms with a named key": _set_bucket(
                2, kms_key="arn:aws:kms:us-east-1:000000000000:key/app"
            ),
            "versioning suspended": _set_bucket(0, versioning="Suspended"),
            "a new KMS bucket": _add_bucket("ml-data"),
            "dual-layer KMS encryption": _set_bucket(1, encryption="aws:kms:dsse"),
            "public-read but KMS-encrypted": _set_bucket(0, acl="public-read"),
        },
    ),
    CloudCheck(
        id="cloud-s3-versioning",
        title="S3 versioning enabled",
        requirement="Ensure versioning is enabled on every S3 bucket.",
        rego="""violations contains b.name if {
	some b in input.buckets
	b.versioning != "Enabled"
}

violations contains b.name if {
	some b in input.buckets
	not b.versioning
}""",
        violates=lambda p: any(b["versioning"] != "Enabled" for b in p["buckets"]),
        sections=("buckets",),
        bad={
            "suspended": _set_bucket(0, versioning="Suspended"),
            "never enabled": _add_bucket("scratch", versioning=None),
            "trail bucket suspended": _set_bucket(2, versioning="Suspended"),
            "a new suspended bucket": _add_bucket("tmp", versioning="Suspended"),
        },
        near={
            "AES256 but versioned": _set_bucket(1, encryption="AES256"),
            "new versioned bucket": _add_bucket("reports"),
            "versioned without a public access block": _set_bucket(0, block_public=None),
            "a new versioned AES256 bucket": _add_bucket("archive", encryption="AES256"),
        },
    ),
    CloudCheck(
        id="cloud-ebs-encryption",
        title="Ensure EBS volume encryption is enabled",
        requirement=(
            "Ensure EBS volume encryption is enabled in all regions (CIS AWS 2.2.1): every EBS "
            "volume of the account must be encrypted, and encryption by default must be on in "
            "every region where the account has volumes."
        ),
        rego="""violations contains v.id if {
	some v in input.volumes
	v.encrypted != true
}

violations contains v.region if {
	some v in input.volumes
	not input.ebs_default[v.region] == true
}""",
        violates=lambda p: not _ebs_ok(p),
        sections=("volumes", "ebs_default"),
        bad={
            "encryption by default off": _set("ebs_default_encryption", False),
            "an unencrypted volume": _append("volumes", {"size": 50, "encrypted": False}),
            "the data volume unencrypted": _edit("volumes", 1, encrypted=False),
            "the boot volume unencrypted": _edit("volumes", 0, encrypted=False),
            "a small unencrypted scratch volume": _append(
                "volumes", {"size": 1, "encrypted": False}
            ),
            "encryption by default off in another region": _region("ebs_default_encryption", False),
            "an unencrypted volume in another region": _region(
                "volumes", append={"size": 20, "encrypted": False}
            ),
        },
        near={
            "another encrypted volume": _append("volumes", {"size": 500, "encrypted": True}),
            "a large encrypted volume": _append("volumes", {"size": 2000, "encrypted": True}),
            "a 1 GiB encrypted volume": _append("volumes", {"size": 1, "encrypted": True}),
            "no volume at all": _set("volumes", []),
            "a single encrypted volume": _set("volumes", [{"size": 8, "encrypted": True}]),
            "another region without volumes or encryption by default": _both(
                _region("volumes", []), _region("ebs_default_encryption", False)
            ),
        },
    ),
    CloudCheck(
        id="cloud-sg-admin-ports",
        title="Ensure no security groups allow ingress from anywhere to remote administration ports",
        requirement=(
            "Ensure no security groups allow ingress from 0.0.0.0/0 or ::/0 to remote server "
            "administration ports in any region (CIS AWS 5.2, 5.3): SSH (22) and RDP (3389)."
        ),
        rego=_PORTS_REGO,
        violates=_ports_open,
        sections=("security_groups",),
        bad={
            "SSH from anywhere": _rule("tcp", 22, 22, "0.0.0.0/0", 1),
            "RDP from anywhere": _rule("tcp", 3389, 3389, "0.0.0.0/0", 0),
            "a wide port range from anywhere": _rule("tcp", 0, 65535, "0.0.0.0/0", 2),
            "all traffic from anywhere": _rule("-1", 0, 0, "0.0.0.0/0", 2),
            "SSH from anywhere over IPv6": _rule("tcp", 22, 22, "::/0", 0),
            "a range ending at 3389": _rule("tcp", 3000, 3389, "0.0.0.0/0", 1),
            "SSH from anywhere in another region": _region_rule("tcp", 22, 22, "0.0.0.0/0"),
        },
        near={
            "SSH from the VPC only": _rule("tcp", 22, 22, "10.0.0.0/8", 2),
            "port 2222 from anywhere": _rule("tcp", 2222, 2222, "0.0.0.0/0", 0),
            "a range ending just below 22": _rule("tcp", 10, 21, "0.0.0.0/0", 0),
            "UDP 3389 from anywhere": _rule("udp", 3389, 3389, "0.0.0.0/0", 0),
            "RDP from one address": _rule("tcp", 3389, 3389, "203.0.113.7/32", 1),
            "HTTPS from anywhere over IPv6": _rule("tcp", 443, 443, "::/0", 0),
            "RDP from the VPC in another region": _region_rule("tcp", 3389, 3389, "10.20.0.0/16"),
        },
    ),
    CloudCheck(
        id="cloud-iam-console-mfa",
        title="MFA for every console user",
        requirement=(
            "Ensure multi-factor authentication (MFA) is enabled for all IAM users that have a "
            "console password (CIS AWS 1.10)."
        ),
        rego="""violations contains u.name if {
	some u in input.users
	u.console == true
	u.mfa_devices == 0
}""",
        violates=lambda p: any(u["console"] and not u["mfa"] for u in p["users"]),
        sections=("users",),
        bad={
            "console user without MFA": _edit("users", 1, mfa=False),
            "new console user": _append(
                "users", {"name": "carol", "console": True, "mfa": False, "keys": []}
            ),
            "alice loses her MFA device": _edit("users", 0, mfa=False),
            "a console user with keys and no MFA": _append(
                "users", {"name": "dave", "console": True, "mfa": False, "keys": ["Active"]}
            ),
        },
        near={
            "API-only user without MFA": _append(
                "users", {"name": "backup-job", "console": False, "mfa": False, "keys": ["Active"]}
            ),
            "a new console user with MFA": _append(
                "users", {"name": "erin", "console": True, "mfa": True, "keys": []}
            ),
            "a user with an inactive key only": _append(
                "users", {"name": "old-ci", "console": False, "mfa": False, "keys": ["Inactive"]}
            ),
            "an API-only user with MFA": _append(
                "users", {"name": "etl", "console": False, "mfa": True, "keys": ["Active"]}
            ),
        },
    ),
    CloudCheck(
        id="cloud-iam-single-active-key",
        title="At most one active access key per user",
        requirement=(
            "Ensure there is only one active access key available for any single IAM user "
            "(CIS AWS 1.13)."
        ),
        rego="""violations contains u.name if {
	some u in input.users
	count([k | some k in u.access_keys; k == "Active"]) > 1
}""",
        violates=lambda p: any(u["keys"].count("Active") > 1 for u in p["users"]),
        sections=("users",),
        bad={
            "two active keys": _edit("users", 2, keys=["Active", "Active"]),
            "console user with two keys": _edit("users", 0, keys=["Active", "Active"]),
            "bob with two active keys": _edit("users", 1, keys=["Active", "Active"]),
            "a new user with two active keys": _append(
                "users",
                {"name": "sync", "console": False, "mfa": False, "keys": ["Active", "Active"]},
            ),
        },
        near={
            "one active and one inactive": _edit("users", 2, keys=["Active", "Inactive"]),
            "two inactive": _edit("users", 1, keys=["Inactive", "Inactive"]),
            "inactive then active": _edit("users", 0, keys=["Inactive", "Active"]),
            "a new user with one key": _append(
                "users", {"name": "sync", "console": False, "mfa": False, "keys": ["Active"]}
            ),
        },
    ),
    CloudCheck(
        id="cloud-cloudtrail",
        title="A multi-region trail is logging",
        requirement=(
            "Ensure CloudTrail is enabled in all regions (CIS AWS 3.1): at least one "
            "multi-region trail must be logging read and write management events."
        ),
        rego="""violations contains "no multi-region trail records management events" if not ok

ok if {
	some t in input.trails
	t.multi_region == true
	t.logging == true
	records_management(t)
}

kinds(t) := {s.ReadWriteType | some s in t.selectors; s.IncludeManagementEvents == true}

records_management(t) if "All" in kinds(t)

records_management(t) if {
	"ReadOnly" in kinds(t)
	"WriteOnly" in kinds(t)
}""",
        violates=lambda p: not _trail_ok(p),
        sections=("trails",),
        bad={
            "logging stopped": _edit("trails", 0, logging=False),
            "single-region trail": _edit("trails", 0, multi_region=False),
            "no trail": _set("trails", []),
            "read events only": _edit(
                "trails",
                0,
                selectors=[{"ReadWriteType": "ReadOnly", "IncludeManagementEvents": True}],
            ),
            "management events excluded": _edit(
                "trails", 0, selectors=[{"ReadWriteType": "All", "IncludeManagementEvents": False}]
            ),
            "two trails, the logging one single-region": _set(
                "trails",
                [
                    {"name": "org-trail", "multi_region": True, "logging": False},
                    {"name": "app-trail", "multi_region": False, "logging": True},
                ],
            ),
        },
        near={
            "a second trail is off": _append(
                "trails", {"name": "legacy-trail", "multi_region": False, "logging": False}
            ),
            "a second multi-region trail logging": _append(
                "trails", {"name": "security-trail", "multi_region": True, "logging": True}
            ),
            "the logging trail is the second one": _set(
                "trails",
                [
                    {"name": "app-trail", "multi_region": False, "logging": True},
                    {"name": "org-trail", "multi_region": True, "logging": True},
                ],
            ),
            "renamed trail": _edit("trails", 0, name="main"),
            "read and write selectors apart": _edit(
                "trails",
                0,
                selectors=[
                    {"ReadWriteType": "ReadOnly", "IncludeManagementEvents": True},
                    {"ReadWriteType": "WriteOnly", "IncludeManagementEvents": True},
                ],
            ),
        },
    ),
    CloudCheck(
        id="cloud-password-policy",
        title="Password policy minimum length 14",
        requirement=(
            "Ensure the IAM password policy requires a minimum length of 14 or greater (CIS AWS "
            "1.8)."
        ),
        rego="""violations contains "password policy too weak" if not input.password_policy.MinimumPasswordLength >= 14""",
        violates=lambda p: (p["password_policy"] or {}).get("MinimumPasswordLength", 0) < 14,
        sections=("password_policy",),
        bad={
            "no policy": _set("password_policy", None),
            "length 8": _set(
                "password_policy", {"MinimumPasswordLength": 8, "RequireSymbols": True}
            ),
            "length 13": _set("password_policy", {"MinimumPasswordLength": 13}),
            "length 10 with every character class": _set(
                "password_policy",
                {
                    "MinimumPasswordLength": 10,
                    "RequireSymbols": True,
                    "RequireNumbers": True,
                    "RequireUppercaseCharacters": True,
                    "RequireLowercaseCharacters": True,
                },
            ),
        },
        near={
            "length 20": _set("password_policy", {"MinimumPasswordLength": 20}),
            "length 14 without symbols": _set("password_policy", {"MinimumPasswordLength": 14}),
            "length 16": _set(
                "password_policy", {"MinimumPasswordLength": 16, "RequireNumbers": True}
            ),
            "length 14 with reuse prevention": _set(
                "password_policy", {"MinimumPasswordLength": 14, "PasswordReusePrevention": 24}
            ),
        },
    ),
]

_BY_ID = {c.id: c for c in CHECKS}


def by_id(check_id: str) -> CloudCheck:
    """A check of this family."""
    return _BY_ID[check_id]


def variants(
    check_id: str,
    seed: int,
    compliant: int,
    non_compliant: int,
    visible_seed: int | None = None,
    judged: CloudCheck | None = None,
    org: Mutation | None = None,
) -> tuple[Variant, list[Variant]]:
    """The visible account and the hidden accounts of a check (data: the plan).

    Args:
        check_id: The judged check.
        seed: Seed of the hidden accounts.
        compliant: Number of hidden compliant accounts.
        non_compliant: Number of hidden violating accounts.
        visible_seed: Seed of the visible account (default ``seed``); a separate seed keeps
            the visible account from telling anything about the hidden ones.
        judged: The check with the organization's parameters (default: the library's).
        org: Applied to every account first: the organization's place for its parameters
            and the clean account's adjustment to them.

    Raises:
        ValueError: a mutation does not do what it claims (a library bug).
    """
    check = judged or _BY_ID[check_id]
    hidden_rng = random.Random(f"{check_id}:hidden:{seed}")
    visible_rng = random.Random(
        f"{check_id}:visible:{seed if visible_seed is None else visible_seed}"
    )
    bad = list(check.bad.items())
    near = list(check.near.items())
    others = [
        (f"{o.id}: {lbl}", m)
        for o in CHECKS
        if o.id != check_id
        for lbl, m in list(o.bad.items())[1:]
    ]

    def make(
        name: str, muts: list[tuple[str, Mutation]], expect: bool, rng: random.Random = hidden_rng
    ) -> Variant:
        for attempt in range(6):
            plan = clean_account()
            if org is not None:
                org(plan)
            notes = []
            extra = rng.sample(others, 1) if attempt < 5 else []
            for label, m in muts + [(f"other requirement ({lbl})", m) for lbl, m in extra]:
                m(plan)
                notes.append(label)
            if check.violates(plan) == expect:
                return Variant(name, plan, {name} if expect else set(), [name], notes)
        raise ValueError(f"{check_id}: {[m[0] for m in muts]} gives the wrong verdict")

    for label, m in bad:
        make("probe", [(label, m)], True)
    for label, m in near:
        make("probe", [(label, m)], False)
    visible = make("visible", near[:1] + bad[:1], True, visible_rng)
    hidden_bad, hidden_near = rotated(hidden_rng, bad[1:]), rotated(hidden_rng, near[1:])
    hidden = [make("", [hidden_near[i % len(hidden_near)]], False) for i in range(compliant)]
    hidden += [make("", [hidden_bad[i % len(hidden_bad)]], True) for i in range(non_compliant)]
    hidden_rng.shuffle(hidden)
    for i, v in enumerate(hidden):
        v.name = f"account-{i + 1:02d}"
        v.units = [v.name]
        v.violating = {v.name} if v.violating else set()
    return visible, hidden
