"""The proxy's own SASL login (sans-IO): the tokens it sends for each mechanism.

The poller drives an exchange: it sends :meth:`SaslLogin.first`, then hands
every server token to :meth:`SaslLogin.step` and sends what comes back until
``done``. SCRAM is scramp's (RFC 5802/7677, server signature verified);
PLAIN is RFC 4616; OAUTHBEARER is RFC 7628's initial response with a token read
from a file at every login (so a rotated token is used on the next one).

Invariants: secrets live in :class:`SaslCredentials` and are never part of
its repr; nothing here logs or does I/O except reading the token file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import scramp

Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
MECHANISMS: tuple[Mechanism, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslLoginError(Exception):
    """The exchange cannot go on (a bad server token, a missing token file)."""


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: Mechanism
    username: str = ""
    password: str = field(default="", repr=False)
    token_file: Path | None = None

    def token(self) -> str:
        if self.token_file is None:
            raise SaslLoginError("OAUTHBEARER needs sasl_oauthbearer_token_file")
        try:
            return self.token_file.read_text().strip()
        except OSError as exc:
            raise SaslLoginError(f"{self.token_file}: {exc.strerror or exc}") from None


class SaslLogin:
    """One exchange for ``credentials``: ``first()`` once, then ``step()`` per server token."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self._creds = credentials
        self._scram: scramp.ScramClient | None = None
        self._round = 0
        self.done = False

    def first(self) -> bytes:
        creds = self._creds
        self._round = 1
        if creds.mechanism == "PLAIN":
            return b"\0" + creds.username.encode() + b"\0" + creds.password.encode()
        if creds.mechanism == "OAUTHBEARER":
            return b"n,,\x01auth=Bearer " + creds.token().encode() + b"\x01\x01"
        self._scram = scramp.ScramClient([creds.mechanism], creds.username, creds.password)
        return self._scram.get_client_first().encode()

    def step(self, server: bytes) -> bytes | None:
        """The answer to the server's token, or None when the exchange is complete."""
        mechanism = self._creds.mechanism
        self._round += 1
        if mechanism == "PLAIN":
            self.done = True
            return None
        if mechanism == "OAUTHBEARER":
            if not server:
                self.done = True
                return None
            # RFC 7628 3.2.3: an error challenge; answer with %x01 and the broker fails us
            return b"\x01"
        scram = self._scram
        if scram is None:
            raise SaslLoginError("step() before first()")
        try:
            if self._round == 2:
                scram.set_server_first(server.decode())
                return scram.get_client_final().encode()
            scram.set_server_final(server.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslLoginError(f"{mechanism}: {exc}") from None
        self.done = True
        return None
