"""Where ``client_rack`` comes from: the setting itself, a file, or a command run once at
start (a cloud metadata lookup, say).

Invariants: the value is resolved once, before the proxy serves; ``client_rack`` wins
over ``client_rack_file``, which wins over ``client_rack_command``; the first non-empty
line, stripped, is the rack; a file that cannot be read, a command that fails, times
out or prints nothing raises :class:`RackSourceError` (the proxy refuses to start: an
operator who asked for a rack must not get a sidecar silently without one). The I/O is
injected, so the rules are tested without files or processes.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from proxy.settings import Settings

COMMAND_TIMEOUT_S = 10.0
MAX_RACK_LENGTH = 255


class RackSourceError(Exception):
    """client_rack could not be found; the message is one line."""


def run_command(command: str) -> str:
    """stdout of ``command`` (split like a shell line, run without a shell)."""
    done = subprocess.run(shlex.split(command), capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, check=True)
    return done.stdout


def read_file(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _first_line(text: str, origin: str) -> str:
    for line in text.splitlines():
        rack = line.strip()
        if rack:
            if len(rack) > MAX_RACK_LENGTH:
                raise RackSourceError(f"{origin}: a rack of {len(rack)} characters "
                                      f"(at most {MAX_RACK_LENGTH})")
            return rack
    raise RackSourceError(f"{origin}: no rack in its output (empty)")


def resolve_client_rack(
    settings: Settings,
    run: Callable[[str], str] = run_command,
    read: Callable[[Path], str] = read_file,
) -> str | None:
    """The rack of this host, or None when no source is configured."""
    if settings.client_rack is not None:
        return _first_line(settings.client_rack, "client_rack")
    if settings.client_rack_file is not None:
        origin = f"client_rack_file {str(settings.client_rack_file)!r}"
        try:
            text = read(settings.client_rack_file)
        except (OSError, UnicodeDecodeError) as exc:
            raise RackSourceError(f"{origin}: {exc}") from None
        return _first_line(text, origin)
    if settings.client_rack_command is not None:
        origin = f"client_rack_command {settings.client_rack_command!r}"
        try:
            text = run(settings.client_rack_command)
        except subprocess.CalledProcessError as exc:
            said = (exc.stderr or "").strip().splitlines()
            raise RackSourceError(f"{origin}: exit status {exc.returncode}"
                                  + (f": {said[-1]}" if said else "")) from None
        except subprocess.TimeoutExpired:
            raise RackSourceError(f"{origin}: no answer within {COMMAND_TIMEOUT_S:g} s"
                                  ) from None
        except (OSError, ValueError) as exc:
            raise RackSourceError(f"{origin}: {exc}") from None
        return _first_line(text, origin)
    return None
