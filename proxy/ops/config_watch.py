"""A watch on the settings file: its content changed since the last look.

For a file mounted from a Kubernetes ConfigMap, which the kubelet replaces by swapping a
symlink (the path's inode and time change, or only the target's): the content itself is
compared (its SHA-256; the file is a few KB, read once per interval). A file that cannot
be read for a moment (mid-swap, or removed) is not a change; the next readable content
that differs from the last applied is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path


def _read(path: Path) -> bytes:
    return path.read_bytes()


class FileWatch:
    def __init__(self, path: Path, read: Callable[[Path], bytes] = _read) -> None:
        self.path = path
        self._read = read
        self._seen = self._fingerprint()

    def _fingerprint(self) -> bytes | None:
        try:
            return hashlib.sha256(self._read(self.path)).digest()
        except OSError:
            return None

    def changed(self) -> bool:
        """True once for each new content (a file that cannot be read is no change)."""
        now = self._fingerprint()
        if now is None or now == self._seen:
            return False
        self._seen = now
        return True
