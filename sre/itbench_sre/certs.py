"""Certificates of the shop's internal TLS edge: a private CA and dated server certificates."""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_certificates(directory: Path, service: str) -> dict[str, str]:
    """Write a CA and the current, a renewed and a lapsed certificate of ``service``.

    Returns:
        File names by role: ``ca``, ``current_cert``, ``current_key``, ``renewed_cert``,
        ``renewed_key``, ``lapsed_cert``, ``lapsed_key``. The files are named by a random
        serial, so a name says nothing about a certificate's dates: only the certificate does.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("shop internal CA"))
        .issuer_name(_name("shop internal CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=800))
        .not_valid_after(now + dt.timedelta(days=800))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out = {"ca": "ca.crt"}
    periods = {
        "current": (now - dt.timedelta(days=30), now + dt.timedelta(days=335)),
        "renewed": (now - dt.timedelta(days=2), now + dt.timedelta(days=363)),
        "lapsed": (now - dt.timedelta(days=395), now - dt.timedelta(days=30)),
    }
    for role, (start, end) in periods.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(service))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(service), x509.DNSName("localhost")]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        stem = f"{service}-{secrets.token_hex(4)}"
        (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{stem}.key").write_bytes(_pem_key(key))
        out[f"{role}_cert"] = f"{stem}.crt"
        out[f"{role}_key"] = f"{stem}.key"
    return out
