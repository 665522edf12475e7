"""The organization's own parameters of a cloud account requirement, drawn per trial.

Every cloud check takes the organization's parameters: resources exempt from it (buckets,
users or security groups, each with a ticket and a last day; an expired exemption exempts
nothing), or values (the minimum password length, the regions in scope, the approved KMS
keys). Every trial draws them from its secret-derived seed, where the organization keeps them
(a tag on the resources, a JSON object in the account's governance bucket, a standards
document in the workspace or the requirement itself) and how the requirement words them,
beside decoy places holding other values (a draft, a superseded copy, a pending request). The
hidden accounts then hold violations of exempt resources, of expired exemptions and of the
catalog's default where the organization asks for more, so a policy written from the
catalog's text alone fails and one that reads the trial's values passes.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from itbench_ciso.checks import cloud
from itbench_ciso.checks.cloud import CloudCheck, Mutation, Plan

#: Resource types an exemption may name, and what the requirement calls them.
NOUNS = {"bucket": "S3 buckets", "user": "IAM users", "group": "security groups"}
#: Names of exemptible resources an account may hold (never a name of the clean account).
NAMES = {
    "bucket": ("public-site", "partner-share", "legacy-export", "media-cdn", "vendor-drop"),
    "user": ("break-glass", "svc-legacy", "auditor-ext", "vendor-support", "migration-bot"),
    "group": ("jump-host", "vendor-vpn", "legacy-rdp", "admin-bastion", "support-access"),
}
#: Tag keys of an exemption, and of look-alikes that are not one (a request, a draft).
TAG_KEYS = ("security-exception", "cis-exemption", "compliance-waiver", "risk-acceptance")
DECOY_TAG_KEYS = ("exception-requested", "exemption-draft", "waiver-pending")
#: The account's governance bucket (its name is one of these and the account's digits).
PREFIXES = ("org-governance", "security-baseline", "compliance-records", "platform-standards")
#: Object keys of the organization's parameters, and of a copy that is not in force.
OBJECT_KEYS = ("cis/parameters.json", "standards/aws-baseline.json", "policy/org-values.json")
DECOY_SUFFIXES = (".draft.json", ".previous.json", ".proposed.json")
DOCUMENTS = ("standards/cloud-baseline.md", "docs/aws-security-standards.md", "handbook/aws.md")
#: JSON field names of an exemption register.
LIST_KEYS = ("exemptions", "exceptions", "waivers")
NAME_KEYS = ("resource", "name")
DATE_KEYS = ("expires", "until", "valid_until")
#: How a document marks a list that is not in force.
MARKERS = ("draft", "superseded", "proposed, not yet in force", "previous revision")
#: Regions an account may use besides the catalog's two.
EXTRA_REGIONS = ("us-west-2", "ap-southeast-2", "eu-central-1", "ca-central-1")

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_OBJECT = re.compile(
    r"JSON object `([^`]+)` in the account's S3 bucket `([a-z0-9-]+)-<account digits>`"
)
_FIELDS = re.compile(r"list `([a-z_]+)`, each entry's fields `([a-z_]+)`, `ticket`, `([a-z_]+)`")
_VALUE_KEY = re.compile(r"under the key `([a-z_]+)`")
_TAG = re.compile(r"the tag `([^`]+)`")
_DOC = re.compile(r"heading \"([^\"]+)\" of the file `([^`]+)`")
_ENTRY = re.compile(r"`([a-z0-9-]+)` \(ticket ([A-Z]+-\d+), last day (\d{4}-\d{2}-\d{2})\)")
_TODAY = re.compile(r"[Tt]oday is (\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True)
class Exemptible:
    """A check whose violations are per resource, some resources exempt.

    Attributes:
        resource: ``bucket``, ``user`` or ``group``.
        offenders: Names (as in the plan) of the resources violating the check.
        spoil: Makes the named resource violate (creating it if missing).
    """

    resource: str
    offenders: Callable[[Plan], set[str]]
    spoil: Callable[[Plan, str], None]


@dataclass(frozen=True)
class Valued:
    """A check taking the organization's values.

    Attributes:
        what: What the values are (a noun phrase).
        key: Name of the values in the evidence's ``org`` section of the reference.
        object_keys: JSON keys the governance object may list them under.
        heading: Heading of the document section listing them.
        draw: Draws the values (as strings) and a decoy's other values.
        derive: The check with the values (truth, mutations), and the base plan's adjustment.
        sentence: The requirement's rule with the values named elsewhere.
    """

    what: str
    key: str
    object_keys: tuple[str, ...]
    heading: str
    draw: Callable[[random.Random], tuple[tuple[str, ...], tuple[str, ...]]]
    derive: Callable[[CloudCheck, tuple[str, ...], random.Random], tuple[CloudCheck, Mutation]]
    sentence: tuple[str, ...]


# --- resources -----------------------------------------------------------------------------


def _find(plan: Plan, resource: str, name: str) -> dict[str, Any]:
    """The named resource of the plan, created compliant if missing."""
    if resource == "bucket":
        items = plan["buckets"]
        new: dict[str, Any] = cloud._bucket(name)
    elif resource == "user":
        items = plan["users"]
        new = {"name": name, "console": True, "mfa": True, "keys": ["Active"]}
    else:
        items = plan["security_groups"]
        new = {
            "name": name,
            "rules": [{"proto": "tcp", "from": 443, "to": 443, "cidr": "10.0.0.0/8"}],
        }
    for item in items:
        if item["name"] == name:
            return item  # type: ignore[no-any-return]
    items.append(new)
    return new


def _groups_open(plan: Plan) -> set[str]:
    out = set()
    for sg in cloud._all_groups(plan):
        for r in sg["rules"]:
            if r["cidr"] not in ("0.0.0.0/0", "::/0"):
                continue
            if r["proto"] == "-1" or (
                r["proto"] == "tcp" and any(r["from"] <= p <= r["to"] for p in (22, 3389))
            ):
                out.add(sg["name"])
    return out


def _spoiler(resource: str, **kw: Any) -> Callable[[Plan, str], None]:
    def spoil(plan: Plan, name: str) -> None:
        _find(plan, resource, name).update(kw)

    return spoil


def _open_admin(plan: Plan, name: str) -> None:
    _find(plan, "group", name)["rules"].append(
        {"proto": "tcp", "from": 22, "to": 22, "cidr": "0.0.0.0/0"}
    )


EXEMPTIBLE: dict[str, Exemptible] = {
    "cloud-s3-public-acl": Exemptible(
        "bucket",
        lambda p: {b["name"] for b in p["buckets"] if b["acl"] in cloud.PUBLIC_ACLS},
        _spoiler("bucket", acl="public-read"),
    ),
    "cloud-s3-public-access-block": Exemptible(
        "bucket",
        lambda p: {b["name"] for b in p["buckets"] if not cloud._blocked(p, b)},
        _spoiler("bucket", block_public=None),
    ),
    "cloud-s3-versioning": Exemptible(
        "bucket",
        lambda p: {b["name"] for b in p["buckets"] if b["versioning"] != "Enabled"},
        _spoiler("bucket", versioning="Suspended"),
    ),
    "cloud-iam-console-mfa": Exemptible(
        "user",
        lambda p: {u["name"] for u in p["users"] if u["console"] and not u["mfa"]},
        _spoiler("user", console=True, mfa=False),
    ),
    "cloud-iam-single-active-key": Exemptible(
        "user",
        lambda p: {u["name"] for u in p["users"] if u["keys"].count("Active") > 1},
        _spoiler("user", keys=["Active", "Active"]),
    ),
    "cloud-sg-admin-ports": Exemptible("group", _groups_open, _open_admin),
}


# --- values ----------------------------------------------------------------------------------


def _set_policy(length: int, **kw: Any) -> Mutation:
    return cloud._set("password_policy", {"MinimumPasswordLength": length, **kw})


def _draw_length(rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...]]:
    value = rng.choice((15, 16, 17, 18, 20))
    decoy = rng.choice([n for n in (12, 14, 16, 24) if n != value])
    return (str(value),), (str(decoy),)


def _derive_length(
    check: CloudCheck, values: tuple[str, ...], rng: random.Random
) -> tuple[CloudCheck, Mutation]:
    n = int(values[0])
    prepare = _set_policy(n + rng.choice((0, 2, 4)), RequireSymbols=True)
    bad = {
        "no policy": cloud._set("password_policy", None),
        f"length {n - 1}, one short": _set_policy(n - 1, RequireSymbols=True),
        "length 14, the catalog's minimum": _set_policy(14),
        f"length {n - 1} with every character class": _set_policy(
            n - 1,
            RequireSymbols=True,
            RequireNumbers=True,
            RequireUppercaseCharacters=True,
            RequireLowercaseCharacters=True,
        ),
        "length 14 with reuse prevention": _set_policy(14, PasswordReusePrevention=24),
    }
    near = {
        f"length {n}": _set_policy(n),
        f"length {n} with symbols": _set_policy(n, RequireSymbols=True),
        f"length {n + 3}": _set_policy(n + 3, RequireNumbers=True),
        f"length {n} with reuse prevention": _set_policy(n, PasswordReusePrevention=24),
    }

    def violates(p: Plan) -> bool:
        return int((p["password_policy"] or {}).get("MinimumPasswordLength", 0)) < n

    rego = (
        'violations contains "password policy too weak" if not '
        "input.password_policy.MinimumPasswordLength >= to_number(input.org.min_length[0])"
    )
    out = dataclasses.replace(check, rego=rego, violates=violates, bad=bad, near=near)
    return out, prepare


def _draw_regions(rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...]]:
    extra = rng.choice(EXTRA_REGIONS)
    kept = rng.choice(cloud.REGIONS)
    left = next(r for r in cloud.REGIONS if r != kept)
    scope = [extra, kept]
    rng.shuffle(scope)
    return tuple(scope), (left, rng.choice([r for r in EXTRA_REGIONS if r != extra]))


def _part(plan: Plan, region: str) -> Plan:
    part: Plan = plan if region == cloud.REGIONS[0] else plan["regions"][region]
    return part


def _in_region(region: str, key: str, value: Any = None, append: Any = None) -> Mutation:
    def mutate(plan: Plan) -> None:
        part = _part(plan, region)
        if append is not None:
            part[key].append(dict(append))
        else:
            part[key] = value

    return mutate


def _derive_regions(
    check: CloudCheck, values: tuple[str, ...], rng: random.Random
) -> tuple[CloudCheck, Mutation]:
    extra = next(r for r in values if r not in cloud.REGIONS)
    kept = next(r for r in values if r in cloud.REGIONS)
    left = next(r for r in cloud.REGIONS if r not in values)

    def prepare(plan: Plan) -> None:
        plan["regions"][extra] = {
            "security_groups": [],
            "volumes": [{"size": rng.choice((30, 80)), "encrypted": True}],
            "ebs_default_encryption": True,
        }

    unencrypted = {"size": 20, "encrypted": False}
    bad = {
        "an unencrypted volume": cloud._append("volumes", unencrypted)
        if kept == cloud.REGIONS[0]
        else _in_region(kept, "volumes", append=unencrypted),
        f"an unencrypted volume in {extra}": _in_region(extra, "volumes", append=unencrypted),
        f"encryption by default off in {extra}": _in_region(extra, "ebs_default_encryption", False),
        f"a small unencrypted volume in {extra}": _in_region(
            extra, "volumes", append={"size": 1, "encrypted": False}
        ),
    }
    near = {
        "another encrypted volume": cloud._append("volumes", {"size": 500, "encrypted": True}),
        f"an unencrypted volume in {left}, out of scope": _in_region(
            left, "volumes", append=unencrypted
        ),
        f"encryption by default off in {left}, out of scope": _in_region(
            left, "ebs_default_encryption", False
        ),
        f"both off in {left}, out of scope": cloud._both(
            _in_region(left, "ebs_default_encryption", False),
            _in_region(left, "volumes", append={"size": 8, "encrypted": False}),
        ),
    }

    def violates(p: Plan) -> bool:
        for region in values:
            part = _part(p, region)
            if not all(v["encrypted"] for v in part["volumes"]):
                return True
            if part["volumes"] and not part["ebs_default_encryption"]:
                return True
        return False

    return dataclasses.replace(check, violates=violates, bad=bad, near=near), prepare


def _key_arn(rng: random.Random) -> str:
    account = rng.randrange(10**11, 10**12)
    uid = "-".join(f"{rng.getrandbits(b * 4):0{b}x}" for b in (8, 4, 4, 4, 12))
    return f"arn:aws:kms:us-east-1:{account}:key/{uid}"


def _draw_keys(rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (_key_arn(rng),), (_key_arn(rng),)


def _derive_trail_key(
    check: CloudCheck, values: tuple[str, ...], rng: random.Random
) -> tuple[CloudCheck, Mutation]:
    key = values[0]
    other = _key_arn(rng)
    prepare = cloud._edit("trails", 0, kms_key=key)
    bad = {
        "logging stopped": cloud._edit("trails", 0, logging=False),
        "encrypted with another key": cloud._edit("trails", 0, kms_key=other),
        "not encrypted": cloud._edit("trails", 0, kms_key=None),
        "the approved key on a single-region trail only": cloud._set(
            "trails",
            [
                {"name": "org-trail", "multi_region": True, "logging": True},
                {"name": "app-trail", "multi_region": False, "logging": True, "kms_key": key},
            ],
        ),
    }
    near = {
        "a second trail is off": cloud._append(
            "trails", {"name": "legacy-trail", "multi_region": False, "logging": False}
        ),
        "a second trail with another key": cloud._append(
            "trails",
            {"name": "app-trail", "multi_region": False, "logging": True, "kms_key": other},
        ),
        "the compliant trail is the second one": cloud._set(
            "trails",
            [
                {"name": "app-trail", "multi_region": True, "logging": True},
                {"name": "org-trail", "multi_region": True, "logging": True, "kms_key": key},
            ],
        ),
        "renamed trail": cloud._edit("trails", 0, name="main"),
    }

    def violates(p: Plan) -> bool:
        return not any(
            t["multi_region"]
            and t["logging"]
            and cloud._records_management(t)
            and t.get("kms_key") == key
            for t in p["trails"]
        )

    rego = check.rego.replace(
        "\tt.logging == true\n", "\tt.logging == true\n\tt.kms_key in input.org.kms_keys\n"
    )
    if rego == check.rego:
        raise ValueError("cloud-cloudtrail: the reference policy changed its shape")
    return dataclasses.replace(check, rego=rego, violates=violates, bad=bad, near=near), prepare


def _derive_bucket_keys(
    check: CloudCheck, values: tuple[str, ...], rng: random.Random
) -> tuple[CloudCheck, Mutation]:
    key = values[0]
    other = _key_arn(rng)

    def prepare(plan: Plan) -> None:
        for b in plan["buckets"]:
            b["kms_key"] = key

    bad = {
        "AES256": cloud._set_bucket(0, encryption="AES256"),
        "the AWS managed key": cloud._set_bucket(1, kms_key=None),
        "another key": cloud._set_bucket(2, kms_key=other),
        "a new bucket with the AWS managed key": cloud._add_bucket("cache"),
        "dual-layer with another key": cloud._set_bucket(
            0, encryption="aws:kms:dsse", kms_key=other
        ),
    }
    near = {
        "a new bucket with the approved key": cloud._add_bucket("ml-data", kms_key=key),
        "versioning suspended": cloud._set_bucket(0, versioning="Suspended"),
        "dual-layer with the approved key": cloud._set_bucket(1, encryption="aws:kms:dsse"),
        "public-read with the approved key": cloud._set_bucket(0, acl="public-read"),
    }

    def violates(p: Plan) -> bool:
        return any(
            b["encryption"] not in ("aws:kms", "aws:kms:dsse") or b.get("kms_key") != key
            for b in p["buckets"]
        )

    rego = """violations contains b.name if {
	some b in input.buckets
	not approved(b)
}

approved(b) if {
	some rule in b.sse_rules
	rule.algorithm in {"aws:kms", "aws:kms:dsse"}
	rule.kms_key in input.org.kms_keys
}"""
    return dataclasses.replace(check, rego=rego, violates=violates, bad=bad, near=near), prepare


VALUED: dict[str, Valued] = {
    "cloud-password-policy": Valued(
        what="the minimum length of an IAM password",
        key="min_length",
        object_keys=("minimum_password_length", "password_min_length", "min_length"),
        heading="Minimum password length",
        draw=_draw_length,
        derive=_derive_length,
        sentence=(
            "Ensure the IAM password policy requires a minimum length of at least the "
            "organization's minimum (CIS AWS 1.8).",
            "The account's IAM password policy must require passwords no shorter than the "
            "organization's minimum length; a missing policy is a violation.",
        ),
    ),
    "cloud-ebs-encryption": Valued(
        what="the regions in scope of this requirement",
        key="regions",
        object_keys=("regions_in_scope", "scoped_regions", "regions"),
        heading="Regions in scope",
        draw=_draw_regions,
        derive=_derive_regions,
        sentence=(
            "Ensure EBS volume encryption is enabled in every region in scope (CIS AWS 2.2.1): "
            "every EBS volume of a region in scope must be encrypted, and encryption by "
            "default must be on in every region in scope where the account has volumes. "
            "Regions out of scope are not judged.",
            "In each region the organization has in scope, every EBS volume must be encrypted "
            "and, where the region has volumes, EBS encryption by default must be on; other "
            "regions are out of scope.",
        ),
    ),
    "cloud-cloudtrail": Valued(
        what="the KMS key CloudTrail logs must be encrypted with (its ARN)",
        key="kms_keys",
        object_keys=("cloudtrail_kms_key", "trail_key_arns", "log_encryption_keys"),
        heading="CloudTrail encryption key",
        draw=_draw_keys,
        derive=_derive_trail_key,
        sentence=(
            "Ensure CloudTrail is enabled in all regions (CIS AWS 3.1, 3.5): at least one "
            "multi-region trail must be logging read and write management events and encrypt "
            "its logs with the organization's KMS key.",
            "At least one multi-region trail must be logging, record read and write management "
            "events and have its logs encrypted with the KMS key the organization designates.",
        ),
    ),
    "cloud-s3-encryption-kms": Valued(
        what="the KMS key S3 default encryption must use (its ARN)",
        key="kms_keys",
        object_keys=("s3_kms_key", "bucket_key_arns", "default_encryption_keys"),
        heading="S3 encryption key",
        draw=_draw_keys,
        derive=_derive_bucket_keys,
        sentence=(
            "Ensure all S3 buckets employ encryption at rest with the organization's KMS key: "
            "every bucket's default encryption must be SSE-KMS (or DSSE-KMS) with that key; "
            "the AWS managed key or any other key does not count.",
            "Every S3 bucket's default encryption must be SSE-KMS or DSSE-KMS using the KMS "
            "key the organization designates; no other key, and no other algorithm, complies.",
        ),
    ),
}

#: Every check with organization parameters.
CHECKS = (*EXEMPTIBLE, *VALUED)


# --- a trial's parameters ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One exemption: a resource, its ticket and its last day."""

    name: str
    ticket: str
    until: date


@dataclass(frozen=True)
class CloudParams:
    """One trial's organization parameters for one check.

    Attributes:
        check: The check's id.
        home: ``tag``, ``object``, ``document`` or ``requirement``.
        rule: The requirement's rule (without where the values are).
        today: The audit date (exemptions only).
        entries: The exemptions in force or expired (exemptible checks).
        decoy_entries: Exemptions only a decoy place holds.
        values: The organization's values (valued checks).
        decoy_values: Other values a decoy place holds.
        tag_key: Tag key of an exemption (tag home); ``decoy_tag``: a look-alike's.
        prefix: The governance bucket's name before the account's digits.
        object_key: Key of the parameters' object; ``decoy_key``: a copy not in force.
        fields: JSON names: the list, an entry's resource and its last day (exemptions).
        value_key: JSON key of the values in the governance object (valued checks).
        document: Path of the standards document; ``heading``: its section; ``marker``:
            how its decoy section is marked.
        salt: Seed of the layout of documents and of the derived check's mutations.
    """

    check: str
    home: str
    rule: str
    today: date = date(2026, 1, 1)
    entries: tuple[Entry, ...] = ()
    decoy_entries: tuple[Entry, ...] = ()
    values: tuple[str, ...] = ()
    decoy_values: tuple[str, ...] = ()
    tag_key: str = ""
    decoy_tag: str = ""
    prefix: str = ""
    object_key: str = ""
    decoy_key: str = ""
    fields: tuple[str, str, str] = ("exemptions", "resource", "expires")
    value_key: str = ""
    document: str = ""
    heading: str = ""
    marker: str = ""
    salt: int = 0
    extra_regions: tuple[str, ...] = field(default_factory=tuple)

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions the trial's accounts operate in."""
        return (*cloud.REGIONS, *self.extra_regions)

    @property
    def active(self) -> tuple[str, ...]:
        """Resources whose exemption holds today."""
        return tuple(e.name for e in self.entries if e.until >= self.today)

    @property
    def expired(self) -> tuple[str, ...]:
        """Resources whose exemption has ended."""
        return tuple(e.name for e in self.entries if e.until < self.today)

    def where(self) -> str:
        """Where the parameters are, as the requirement says it."""
        if self.home == "object":
            if self.check in EXEMPTIBLE:
                fmt = (
                    f"a JSON document: list `{self.fields[0]}`, each entry's fields "
                    f"`{self.fields[1]}`, `ticket`, `{self.fields[2]}` (the last day, "
                    "YYYY-MM-DD)"
                )
                if EXEMPTIBLE[self.check].resource == "bucket":
                    fmt += "; a bucket is named with the account's digits"
            else:
                fmt = f"a JSON document, the values as a list under the key `{self.value_key}`"
            return (
                f"the JSON object `{self.object_key}` in the account's S3 bucket "
                f"`{self.prefix}-<account digits>` ({fmt})"
            )
        if self.home == "tag":
            return (
                f"the tag `{self.tag_key}` on the exempt resource itself (its value names the "
                "ticket and the last day, YYYY-MM-DD)"
            )
        if self.home == "document":
            return f'the list under the heading "{self.heading}" of the file `{self.document}` in your workspace'
        if self.check in EXEMPTIBLE:
            return "the following list: " + ", ".join(
                f"`{e.name}` (ticket {e.ticket}, last day {e.until.isoformat()})"
                for e in self.entries
            )
        return "the following list: " + " and ".join(f"`{v}`" for v in self.values)

    def requirement(self) -> str:
        """The requirement as the trial states it."""
        rng = random.Random(self.salt)
        if self.check in EXEMPTIBLE:
            noun = NOUNS[EXEMPTIBLE[self.check].resource]
            where = self.where()
            sentence = rng.choice(
                (
                    f"The organization exempts some {noun} from this requirement until a last "
                    f"day, that day included; its exemptions are in {where}. Today is "
                    f"{self.today.isoformat()}; an expired exemption exempts nothing.",
                    f"Exempt {noun} are not violations while their exemption runs (up to and "
                    f"including its last day). Exemptions: {where}. For this audit, today is "
                    f"{self.today.isoformat()}.",
                )
            )
            return f"{self.rule} {sentence}"
        what = VALUED[self.check].what
        sentence = rng.choice(
            (
                f"The organization records {what} in {self.where()}.",
                f"For {what}, the only source that counts is {self.where()}.",
            )
        )
        return f"{self.rule} {sentence}"

    def derived(self) -> tuple[CloudCheck, Mutation]:
        """The check with this organization's parameters, and the base plan's adjustment."""
        base = cloud.by_id(self.check)
        rng = random.Random(self.salt + 1)
        if self.check in VALUED:
            check, adjust = VALUED[self.check].derive(base, self.values, rng)
        else:
            check, adjust = self._exempt_check(base)
        place = self._place()

        def prepare(plan: Plan) -> None:
            place(plan)
            adjust(plan)

        return check, prepare

    def _exempt_check(self, base: CloudCheck) -> tuple[CloudCheck, Mutation]:
        kind = EXEMPTIBLE[self.check]
        active, expired = self.active, self.expired
        decoyed = tuple(e.name for e in self.decoy_entries)

        def spoil(*names: str) -> Mutation:
            def mutate(plan: Plan) -> None:
                for n in names:
                    kind.spoil(plan, n)

            return mutate

        orig_bad, orig_near = list(base.bad.items()), list(base.near.items())
        bad = {
            orig_bad[0][0]: orig_bad[0][1],
            f"{expired[0]}, its exemption expired": spoil(expired[0]),
            f"{decoyed[0]}, exempt only in a place not in force": spoil(decoyed[0]),
            f"exempt {active[0]} and {orig_bad[1][0]}": cloud._both(
                spoil(active[0]), orig_bad[1][1]
            ),
            f"{expired[-1]} expired and {active[-1]} exempt": spoil(expired[-1], active[-1]),
        }
        near = {
            orig_near[0][0]: orig_near[0][1],
            f"exempt {active[0]}": spoil(active[0]),
            f"exempt {active[-1]} and {orig_near[1][0]}": cloud._both(
                spoil(active[-1]), orig_near[1][1]
            ),
            "every exempt resource": spoil(*active),
            f"exempt {active[0]} and {orig_near[2][0]}": cloud._both(
                spoil(active[0]), orig_near[2][1]
            ),
        }
        ok = set(active)

        def violates(p: Plan) -> bool:
            return bool(kind.offenders(p) - ok)

        rego = exempt_rego(self.check, self.today.isoformat())

        def adjust(plan: Plan) -> None:
            for e in (*self.entries, *self.decoy_entries):
                _find(plan, kind.resource, e.name)

        return dataclasses.replace(base, rego=rego, violates=violates, bad=bad, near=near), adjust

    def _place(self) -> Mutation:
        """The mutation giving an account the organization's place and the decoys."""
        resource = EXEMPTIBLE[self.check].resource if self.check in EXEMPTIBLE else ""

        def mutate(plan: Plan) -> None:
            if self.home == "tag":
                for e in self.entries:
                    _find(plan, resource, e.name).setdefault("tags", {})[self.tag_key] = _tag(e)
                for e in self.decoy_entries:
                    _find(plan, resource, e.name).setdefault("tags", {})[self.decoy_tag] = _tag(e)
            objects = {
                self.object_key: self._json(real=True),
                self.decoy_key: self._json(real=False),
            }
            if self.home != "object":
                objects = {self.decoy_key: self._json(real=False)}
            plan["buckets"].append(cloud._bucket(self.prefix, objects=objects))
            if self.home == "object":
                archive = {self.object_key: self._json(real=False)}
                plan["buckets"].append(cloud._bucket(f"{self.prefix}-archive", objects=archive))

        return mutate

    def _json(self, real: bool) -> str:
        """The governance object (real, or a copy not in force), ``{suffix}`` for the digits."""
        if self.check in VALUED:
            values = self.values if real else self.decoy_values
            key = self.value_key
            body: Any = [int(v) if v.isdigit() else v for v in values]
            return json.dumps({key: body}, indent=1)
        bucket = EXEMPTIBLE[self.check].resource == "bucket"
        entries = self.entries if real else self.decoy_entries + self.entries[:1]
        listed, name_key, date_key = self.fields
        later = self.today + timedelta(days=200)
        rows = [
            {
                name_key: f"{e.name}-{{suffix}}" if bucket else e.name,
                "ticket": e.ticket,
                date_key: (e.until if real else max(e.until, later)).isoformat(),
            }
            for e in entries
        ]
        return json.dumps({listed: rows}, indent=1)

    def documents(self) -> dict[str, str]:
        """The workspace's standards documents (path -> text), for a document home."""
        if self.home != "document":
            return {}
        rng = random.Random(self.salt + 2)
        if self.check in EXEMPTIBLE:
            later = self.today + timedelta(days=200)
            real = "".join(
                f"- {e.name} ({e.ticket}), last day {e.until.isoformat()}\n" for e in self.entries
            )
            other = "".join(
                f"- {e.name} ({e.ticket}), last day {later.isoformat()}\n"
                for e in (*self.decoy_entries, *self.entries)
            )
        else:
            real = "".join(f"- {v}\n" for v in self.values)
            other = "".join(f"- {v}\n" for v in self.decoy_values)
        sections = [
            f"## {self.heading}\n\n{real}\n",
            f"## {self.heading} ({self.marker})\n\n{other}\n",
        ]
        rng.shuffle(sections)
        head = "# Cloud security standards\n\nMaintained by the security team; changes need a ticket.\n\n"
        return {self.document: head + "".join(sections) + "## Contacts\n\n- cloud-security\n"}


def exempt_rego(check_id: str, today: str) -> str:
    """The check's reference Rego, its violations outside the resources exempt ``today``."""
    rego = cloud.by_id(check_id).rego.replace(
        "violations contains sg.id", "violations contains sg.name"
    )
    rego = re.sub(r"^violations contains\b", "raw_violations contains", rego, flags=re.M)
    return (
        rego
        + f"""

org_today := "{today}"

exempt(name) if {{
	some e in input.org.exemptions
	e.name == name
	e.until >= org_today
}}

violations contains v if {{
	some v in raw_violations
	not exempt(v)
}}"""
    )


def valued_rego(check_id: str) -> str:
    """The reference Rego of a valued check (the values come from the evidence's ``org``)."""
    check, _ = VALUED[check_id].derive(
        cloud.by_id(check_id), VALUED[check_id].draw(random.Random(0))[0], random.Random(0)
    )
    return check.rego


def _tag(e: Entry) -> str:
    return f"{e.ticket} until {e.until.isoformat()}"


def draw(check_id: str, rng: random.Random) -> CloudParams | None:
    """A trial's parameters of ``check_id`` (None for a check without any)."""
    if check_id in EXEMPTIBLE:
        return _draw_exemptions(check_id, rng)
    if check_id not in VALUED:
        return None
    kind = VALUED[check_id]
    values, decoys = kind.draw(rng)
    home = rng.choice(("object", "document", "requirement"))
    return CloudParams(
        check=check_id,
        home=home,
        rule=rng.choice(kind.sentence),
        values=values,
        decoy_values=decoys,
        value_key=rng.choice(kind.object_keys),
        prefix=rng.choice(PREFIXES),
        object_key=(key := rng.choice(OBJECT_KEYS)),
        decoy_key=key.removesuffix(".json") + rng.choice(DECOY_SUFFIXES),
        document=rng.choice(DOCUMENTS),
        heading=kind.heading,
        marker=rng.choice(MARKERS),
        salt=rng.getrandbits(32),
        extra_regions=tuple(r for r in values if r in EXTRA_REGIONS),
    )


def _draw_exemptions(check_id: str, rng: random.Random) -> CloudParams:
    kind = EXEMPTIBLE[check_id]
    today = date(2026, 1, 1) + timedelta(days=rng.randrange(365))
    n_active = rng.choice((1, 2))
    names = rng.sample(NAMES[kind.resource], n_active + 2)
    tickets = rng.sample(range(1000, 9999), len(names))
    prefix = rng.choice(("SEC", "RISK", "GRC"))
    entries = [
        Entry(n, f"{prefix}-{t}", today + timedelta(days=rng.choice((0, 5, 40, 150))))
        for n, t in zip(names[:n_active], tickets, strict=False)
    ]
    entries.append(
        Entry(
            names[n_active],
            f"{prefix}-{tickets[n_active]}",
            today - timedelta(days=rng.choice((1, 12, 90))),
        )
    )
    rng.shuffle(entries)
    decoy = Entry(
        names[-1], f"{prefix}-{tickets[-1]}", today + timedelta(days=rng.choice((30, 300)))
    )
    homes = ["tag", "object"] + (["document", "requirement"] if kind.resource != "bucket" else [])
    base = cloud.by_id(check_id)
    return CloudParams(
        check=check_id,
        home=rng.choice(homes),
        rule=base.requirement,
        today=today,
        entries=tuple(entries),
        decoy_entries=(decoy,),
        tag_key=rng.choice(TAG_KEYS),
        decoy_tag=rng.choice(DECOY_TAG_KEYS),
        prefix=rng.choice(PREFIXES),
        object_key=(key := rng.choice(OBJECT_KEYS)),
        decoy_key=key.removesuffix(".json") + rng.choice(DECOY_SUFFIXES),
        fields=(rng.choice(LIST_KEYS), rng.choice(NAME_KEYS), rng.choice(DATE_KEYS)),
        document=rng.choice(DOCUMENTS),
        heading=f"Exempt {NOUNS[kind.resource]}",
        marker=rng.choice(MARKERS),
        salt=rng.getrandbits(32),
    )
