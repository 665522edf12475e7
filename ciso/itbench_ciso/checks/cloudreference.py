"""The reference artifacts of a cloud check with the organization's parameters.

Reads where the requirement says the parameters are: constants (the requirement itself, a
standards document in the workspace) go into the collector as they are; a governance object
or a tag is read by the collector in every account. The collector reports the parameters as
the evidence's ``org`` section (exemptions with their last day, or the values), which the
policy applies.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from itbench_ciso.checks import cloud
from itbench_ciso.checks.cloudparams import (
    _DOC,
    _ENTRY,
    _FIELDS,
    _OBJECT,
    _TAG,
    _TODAY,
    _VALUE_KEY,
    EXEMPTIBLE,
    VALUED,
    exempt_rego,
    valued_rego,
)


class ParamsError(ValueError):
    """The organization's parameters cannot be read where the requirement says they are."""


#: Per resource type: a generator of (name, tags) of every resource of an account.
_TAGGED = {
    "bucket": """
def tagged():
    s3 = boto3.client("s3")
    for b in s3.list_buckets()["Buckets"]:
        try:
            tags = s3.get_bucket_tagging(Bucket=b["Name"])["TagSet"]
        except ClientError:
            tags = []
        yield b["Name"], {t["Key"]: t["Value"] for t in tags}
""",
    "user": """
def tagged():
    iam = boto3.client("iam")
    for u in iam.list_users()["Users"]:
        tags = iam.list_user_tags(UserName=u["UserName"]).get("Tags", [])
        yield u["UserName"], {t["Key"]: t["Value"] for t in tags}
""",
    "group": """
def tagged():
    for region in regions():
        ec2 = boto3.client("ec2", region_name=region)
        for sg in ec2.describe_security_groups()["SecurityGroups"]:
            yield sg["GroupName"], {t["Key"]: t["Value"] for t in sg.get("Tags", [])}
""",
}


def _org_code(check_id: str, requirement: str, workspace: Path | None) -> str:
    """The collector's ``collect_org`` for the place the requirement names."""
    exempt = check_id in EXEMPTIBLE
    if m := _OBJECT.search(requirement):
        key, prefix = m.groups()
        if exempt:
            f = _FIELDS.search(requirement)
            if f is None:
                raise ParamsError("the requirement names an object but not its fields")
            listed, name, until = f.groups()
            shape = (
                f'{{"exemptions": [{{"name": e[{name!r}], "until": e[{until!r}]}} '
                f"for e in doc.get({listed!r}, [])]}}"
            )
        else:
            found = _VALUE_KEY.search(requirement)
            if found is None:
                raise ParamsError("the requirement names an object but not the values' key")
            vkey = VALUED[check_id].key
            shape = f"{{{vkey!r}: doc.get({found.group(1)!r}, [])}}"
        return f"""
def collect_org():
    s3 = boto3.client("s3")
    for b in s3.list_buckets()["Buckets"]:
        if re.fullmatch({prefix!r} + r"-[0-9]+", b["Name"]):
            doc = json.loads(s3.get_object(Bucket=b["Name"], Key={key!r})["Body"].read())
            return {shape}
    return {{}}
"""
    if exempt and (m := _TAG.search(requirement)):
        return (
            _TAGGED[EXEMPTIBLE[check_id].resource]
            + f"""
def collect_org():
    out = []
    for name, tags in tagged():
        found = re.search(r"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}", tags.get({m.group(1)!r}, ""))
        if found:
            out.append({{"name": name, "until": found.group(0)}})
    return {{"exemptions": out}}
"""
        )
    return f"\ndef collect_org():\n    return {_constants(check_id, requirement, workspace)!r}\n"


def _constants(check_id: str, requirement: str, workspace: Path | None) -> dict[str, Any]:
    """The parameters stated in the requirement or listed in a workspace document."""
    exempt = check_id in EXEMPTIBLE
    if m := _DOC.search(requirement):
        heading, rel = m.groups()
        if workspace is None:
            raise ParamsError(f"{rel}: no workspace to read it from")
        try:
            lines = (workspace / rel).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ParamsError(f"{rel}: cannot be read ({exc.strerror})") from exc
        listed, inside = [], False
        for line in lines:
            if line.startswith("#"):
                inside = line.lstrip("#").strip() == heading
            elif inside and line.startswith("- "):
                listed.append(line[2:].strip())
        if not listed:
            raise ParamsError(f"{rel}: no list under the heading {heading!r}")
        if exempt:
            rows = [re.match(r"(\S+) \(([^)]+)\), last day (\S+)", item) for item in listed]
            return {"exemptions": [{"name": r.group(1), "until": r.group(3)} for r in rows if r]}
        return {VALUED[check_id].key: listed}
    tail = requirement.split("the following list: ", 1)
    if len(tail) != 2:
        raise ParamsError("the requirement names no place for the organization's parameters")
    if exempt:
        return {"exemptions": [{"name": n, "until": d} for n, _, d in _ENTRY.findall(tail[1])]}
    return {VALUED[check_id].key: re.findall(r"`([^`]+)`", tail[1].split(". ")[0])}


def collector(check_id: str, requirement: str, workspace: Path | None = None) -> str:
    """The reference collector of ``check_id`` reading the requirement's parameters."""
    check = cloud.by_id(check_id)
    org = _org_code(check_id, requirement, workspace)
    if check_id == "cloud-ebs-encryption":
        regions = '\ndef regions():\n    return list(collect_org()["regions"])\n'
    else:
        regions = f"\ndef regions():\n    return {list(cloud.REGIONS)!r}\n"
    sections = (*check.sections, "org")
    funcs = "".join(cloud._COLLECT[s] for s in check.sections)
    calls = ",\n".join(f'        "{s}": collect_{s}()' for s in sections)
    return (
        '"""Collect account evidence with boto3; the endpoint comes from AWS_ENDPOINT_URL."""\n\n'
        "import json\nimport re\n\nimport boto3\nfrom botocore.exceptions import ClientError\n\n"
        f"{regions}{org}{funcs}\n\n"
        'if __name__ == "__main__":\n'
        f"    print(json.dumps({{\n{calls},\n    }}))\n"
    )


def policy(check_id: str, requirement: str) -> str:
    """The reference policy of ``check_id`` for the requirement's audit date."""
    if check_id in VALUED:
        rego = valued_rego(check_id)
    else:
        today = _TODAY.search(requirement)
        if today is None:
            raise ParamsError("the requirement states no audit date")
        rego = exempt_rego(check_id, today.group(1))
    return dataclasses.replace(cloud.by_id(check_id), rego=rego).policy()


def reference(check_id: str, requirement: str, workspace: Path | None) -> tuple[str, str]:
    """The collector and the policy of ``check_id`` for the trial's requirement."""
    return collector(check_id, requirement, workspace), policy(check_id, requirement)
