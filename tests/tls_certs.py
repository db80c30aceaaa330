"""Certificates made for a test (trustme): nothing is checked in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Pki:
    ca: trustme.CA
    ca_file: Path
    cert: Path  # server certificate chain (127.0.0.1, localhost)
    key: Path

    def issue(self, directory: Path, name: str, *hosts: str) -> tuple[Path, Path]:
        leaf = self.ca.issue_cert(*(hosts or ("127.0.0.1", "localhost")), common_name=name)
        cert, key = directory / f"{name}.pem", directory / f"{name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        for extra in leaf.cert_chain_pems[1:]:
            extra.write_to_path(str(cert), append=True)
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key


def make_pki(directory: Path, name: str = "server") -> Pki:
    ca = trustme.CA()
    ca_file = directory / f"ca-{name}.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    pki = Pki(ca, ca_file, directory / "unused", directory / "unused")
    cert, key = pki.issue(directory, name)
    return Pki(ca, ca_file, cert, key)
