"""SaslHandshake and SaslAuthenticate on a listener without SASL (a TEST DOUBLE).

Invariant: as Kafka's PLAINTEXT/SSL listeners do, both are answered with
ILLEGAL_SASL_STATE; on a SASL listener the connection's
:class:`~simulator.sasl.SaslSession` answers them before dispatch.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from simulator import errors
from simulator.handlers.base import Ctx


async def sasl_handshake(ctx: Ctx, req: Any) -> Any:
    return SaslHandshakeResponse(error_code=errors.ILLEGAL_SASL_STATE, mechanisms=[])


async def sasl_authenticate(ctx: Ctx, req: Any) -> Any:
    return SaslAuthenticateResponse(error_code=errors.ILLEGAL_SASL_STATE,
                                    error_message="SASL is not enabled on this listener",
                                    auth_bytes=b"", session_lifetime_ms=0)
