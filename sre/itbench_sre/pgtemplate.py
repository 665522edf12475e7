"""A PostgreSQL data directory made once per machine and copied for every environment.

``initdb`` plus schema and seed data take several seconds; copying the finished directory takes
a fraction of one. Postgres refuses to run as root, so when the harness is root the cluster
belongs to the ``postgres`` system user and lives under a world-traversable directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from itbench import InfrastructureError, port_open

PG_BIN = Path(os.environ.get("ITBENCH_SRE_PG_BIN", "/usr/lib/postgresql/15/bin"))
TEMPLATE_VERSION = "shop-v2"
DB_USER = "shop"
DB_NAME = "shop"
DB_PASSWORD = "shop-sandbox-pw"

#: Each database client service logs in as its own role (a member of the owner role, so it
#: uses the shop's tables), with its own password: one service's credential can be rotated
#: without the others'.
SERVICE_ROLES: dict[str, tuple[str, str]] = {
    "catalog": ("shop_catalog", "7d1c0f93be42a615"),
    "checkout": ("shop_checkout", "e58a2b07c4d9f136"),
    "notification": ("shop_notification", "2b9f64e1a0c87d53"),
}

_ROLES_SQL = "".join(
    f"CREATE ROLE {role} LOGIN PASSWORD '{password}' IN ROLE {DB_USER};\n"
    for role, password in SERVICE_ROLES.values()
)

SEED_SQL = f"""
CREATE ROLE {DB_USER} LOGIN PASSWORD '{DB_PASSWORD}';
{_ROLES_SQL}CREATE DATABASE {DB_NAME} OWNER {DB_USER};
\\c {DB_NAME}
SET ROLE {DB_USER};
CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price_cents int NOT NULL);
INSERT INTO products (name, price_cents)
  SELECT 'product-' || g, 500 + g * 137 % 4000 FROM generate_series(1, 20) g;
CREATE TABLE orders (id serial PRIMARY KEY, username text NOT NULL, total_cents int NOT NULL,
  shipping_cents int NOT NULL, created_at timestamptz DEFAULT now());
CREATE TABLE notifications (id serial PRIMARY KEY, order_id int NOT NULL, username text NOT NULL,
  sent_at timestamptz DEFAULT now());
"""


def run_user() -> str | None:
    """The user PostgreSQL must run as (``None``: the current user)."""
    return "postgres" if os.geteuid() == 0 else None


def shared_root() -> Path:
    """World-traversable directory for data the datastore user must reach."""
    root = Path(os.environ.get("ITBENCH_SRE_SHARED", Path(tempfile.gettempdir()) / "itbench-sre"))
    root.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        root.chmod(0o1777)
    return root


def cache_dir() -> Path:
    """Per-machine cache directory of the template."""
    d = Path(os.environ.get("ITBENCH_SRE_CACHE", "/var/tmp/itbench-sre-cache"))
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        d.chmod(0o755)
    return d


def _as_user(argv: list[str]) -> list[str]:
    user = run_user()
    return ["runuser", "-u", user, "--", *argv] if user else argv


def _chown(path: Path) -> None:
    user = run_user()
    if not user:
        return
    pw = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)


def _build(target: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="pgtpl-", dir=shared_root()))
    work.chmod(0o755)
    data = work / "data"
    try:
        _chown(work)
        subprocess.run(
            _as_user(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        hba = data / "pg_hba.conf"
        hba.write_text(
            "local all postgres trust\nhost all postgres 127.0.0.1/32 trust\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
        )
        port = _free_port()
        proc = subprocess.Popen(
            _as_user(
                [
                    str(PG_BIN / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "fsync=off",
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            end = time.monotonic() + 30
            while not port_open(port) and time.monotonic() < end:
                time.sleep(0.05)
            time.sleep(0.3)
            subprocess.run(
                [
                    "psql",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-q",
                    "-d",
                    "postgres",
                ],
                input=SEED_SQL.encode(),
                check=True,
                capture_output=True,
                timeout=60,
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.copytree(data, target, symlinks=True)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise InfrastructureError(
            f"cannot build the PostgreSQL template: {exc} {detail.decode(errors='replace')}"
        ) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def template() -> Path:
    """The template data directory, built on first use (safe across processes)."""
    target = cache_dir() / f"pg15-{TEMPLATE_VERSION}"
    if (target / "PG_VERSION").exists():
        return target
    with (cache_dir() / f"{TEMPLATE_VERSION}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "PG_VERSION").exists():
            shutil.rmtree(target, ignore_errors=True)
            _build(target)
    return target


def make_data_dir(dest: Path) -> Path:
    """Copy the template to ``dest`` (which must not exist) owned by the datastore user."""
    shutil.copytree(template(), dest, symlinks=True)
    _chown(dest)
    dest.chmod(0o700)
    return dest
