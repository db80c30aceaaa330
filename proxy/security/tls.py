"""SSL contexts: the proxy's listeners (server side) and its connections to brokers.

Invariants: every context refuses anything older than TLS 1.2; ciphers are
Python's defaults unless a cipher string is given; a server context built
with a client CA bundle requires a client certificate signed by it (mTLS).
Building a context reads the files and fails with :class:`TlsError` (one line
naming the file and the reason) instead of leaving a half-loaded context.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(ValueError):
    """A certificate, key or CA bundle that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class ServerTls:
    """What the listeners present to clients."""

    cert: Path
    key: Path
    client_ca: Path | None = None  # set: clients must present a certificate signed by it
    ciphers: str | None = None
    minimum: ssl.TLSVersion = MINIMUM_VERSION

    def files(self) -> tuple[Path, ...]:
        return (self.cert, self.key) + ((self.client_ca,) if self.client_ca else ())


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """How the proxy's connections to brokers speak TLS."""

    ca: Path | None = None  # None: the system's trust store
    cert: Path | None = None  # a client certificate for brokers that require one
    key: Path | None = None
    check_hostname: bool = True
    ciphers: str | None = None
    minimum: ssl.TLSVersion = MINIMUM_VERSION


def server_context(tls: ServerTls) -> ssl.SSLContext:
    """A server context for the listeners, loaded from ``tls``'s files."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = max(tls.minimum, MINIMUM_VERSION)
    if tls.ciphers:
        _set_ciphers(ctx, tls.ciphers)
    _load_chain(ctx, tls.cert, tls.key)
    if tls.client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load_ca(ctx, tls.client_ca)
    return ctx


def upstream_context(tls: UpstreamTls) -> ssl.SSLContext:
    """A client context for connections to brokers (hostname checked unless turned off)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = max(tls.minimum, MINIMUM_VERSION)
    if tls.ciphers:
        _set_ciphers(ctx, tls.ciphers)
    ctx.check_hostname = tls.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED  # the chain is always verified
    if tls.ca is not None:
        _load_ca(ctx, tls.ca)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if tls.cert is not None:
        _load_chain(ctx, tls.cert, tls.key or tls.cert)
    return ctx


def _set_ciphers(ctx: ssl.SSLContext, ciphers: str) -> None:
    try:
        ctx.set_ciphers(ciphers)
    except ssl.SSLError as exc:
        raise TlsError(f"cipher list {ciphers!r} selects no usable cipher ({exc})") from None


def _load_chain(ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
    for path in (cert, key):
        if not path.is_file():
            raise TlsError(f"{path}: no such file")
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        raise TlsError(f"{cert} / {key}: not a matching PEM certificate and key "
                       f"({exc.reason or exc})") from None
    except OSError as exc:
        raise TlsError(f"{cert} / {key}: {exc.strerror or exc}") from None


def _load_ca(ctx: ssl.SSLContext, ca: Path) -> None:
    if not ca.is_file():
        raise TlsError(f"{ca}: no such file")
    try:
        ctx.load_verify_locations(cafile=str(ca))
    except ssl.SSLError as exc:
        raise TlsError(f"{ca}: not a PEM CA bundle ({exc.reason or exc})") from None
    except OSError as exc:
        raise TlsError(f"{ca}: {exc.strerror or exc}") from None
