"""Network faults a simulated broker can show (a TEST DOUBLE's knobs, not Kafka behaviour).

- ``hang``: connections are accepted and requests read, but nothing is ever answered
  (a process stopped, or a zone partitioned: sockets open, silence);
- ``slow``: every answer is sent ``delay_s`` late;
- ``partition-proxy``: only the proxy's own requests hang (those whose client id is
  ``PROXY_CLIENT_ID``, the one rackguard's poller sends): the proxy is cut off from the
  broker while clients, and the other brokers, still reach it. The simulator cannot tell
  the proxy from clients by address (everything is on 127.0.0.1), so it goes by the
  client id, which the proxy uses for nothing else;
- ``blackhole``: nothing is accepted: the listener is replaced by a socket that listens
  and never accepts, so connects complete into the kernel's backlog until it is full,
  and then time out (no refusal, no answer);
- ``kill`` (in SimulatedCluster): connections refused; the broker leaves ISRs.

Faults other than kill leave the cluster's state alone: ISRs change only when the test
says so (a hung broker is still in its partitions' ISRs until the test shrinks them, as
a real one is until ``replica.lag.time.max.ms`` passes).
"""

from __future__ import annotations

from dataclasses import dataclass

PROXY_CLIENT_ID = b"rackguard-poller"
MODES = ("hang", "slow", "partition-proxy", "blackhole")


@dataclass(frozen=True)
class Fault:
    mode: str
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown fault {self.mode!r}: one of {', '.join(MODES)}")

    def silences(self, frame: bytes) -> bool:
        """True if this request must never be answered."""
        if self.mode == "hang":
            return True
        return self.mode == "partition-proxy" and client_id(frame) == PROXY_CLIENT_ID


def client_id(frame: bytes) -> bytes | None:
    """The request header's client id (header v1+: api key, version, correlation id,
    then an int16-length string), or None."""
    if len(frame) < 10:
        return None
    size = int.from_bytes(frame[8:10], "big", signed=True)
    return None if size < 0 else bytes(frame[10:10 + size])
