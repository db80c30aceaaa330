"""The listeners' certificate, swapped without a restart.

The context handed to the listeners stays the same object for the proxy's
life; its SNI callback (called on every handshake, with or without a server
name) points each new handshake at the context built from the files last
loaded successfully. So a reload changes what new connections get and leaves
open ones alone, and a reload that fails (a missing file, a key that does not
match, a CA bundle that does not parse) keeps the previous context and says why.

Invariants: ``current`` is always a fully loaded context; files are re-read
on :meth:`reload` (SIGHUP) and by :meth:`check` when one of them changed
(size, modification time or inode), and a change is reported once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path

from proxy.security.tls import ServerTls, TlsError, server_context

log = logging.getLogger("rackguard.tls")

Stamp = tuple[tuple[int, int, int] | None, ...]


def _stamp(paths: tuple[Path, ...], stat: Callable[[Path], os.stat_result]) -> Stamp:
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


class ReloadingServerContext:
    """The listeners' SSL context and the certificate currently behind it."""

    def __init__(
        self,
        tls: ServerTls,
        on_reload: Callable[[bool], None] = lambda ok: None,
        stat: Callable[[Path], os.stat_result] = os.stat,
    ) -> None:
        self._tls = tls
        self._stat = stat
        self._on_reload = on_reload
        self._seen = _stamp(tls.files(), stat)
        self.current = server_context(tls)  # TlsError at start: refuse to start
        self.listener = server_context(tls)
        self.listener.sni_callback = self._select
        self.generation = 0  # successful reloads so far

    def _select(self, sslobj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        sslobj.context = self.current
        return None

    def reload(self) -> bool:
        """Load the files now; on failure keep the previous certificate and log why."""
        self._seen = _stamp(self._tls.files(), self._stat)
        try:
            fresh = server_context(self._tls)
        except TlsError as exc:
            log.error("TLS reload failed, keeping the previous certificate: %s", exc)
            self._on_reload(False)
            return False
        self.current = fresh
        self.generation += 1
        log.info("TLS certificate reloaded from %s (new connections use it; open ones keep "
                 "theirs)", self._tls.cert)
        self._on_reload(True)
        return True

    def check(self) -> bool | None:
        """Reload if a file changed since the last look: the reload's result, or None."""
        if _stamp(self._tls.files(), self._stat) == self._seen:
            return None
        return self.reload()


async def watch(reloader: ReloadingServerContext, interval_s: float) -> None:
    """Check the files every ``interval_s`` until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        reloader.check()
