"""Turns one request frame into one response frame for the simulator (a TEST DOUBLE).

Invariant: a frame whose API key we do not implement, whose version is out of
range (other than ApiVersions), or whose body does not decode raises
FrameError, and the caller closes that connection; an ApiVersions request
with a version above ours gets UNSUPPORTED_VERSION in v0 format listing our
versions (so clients can retry with one we support).
"""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsResponse

from simulator import errors
from simulator.core import SimCore
from simulator.handlers import HANDLERS, Ctx
from simulator.handlers.meta import api_versions_body
from simulator.versions import SUPPORTED
from simulator.wire import (
    API_VERSIONS_KEY,
    FETCH_KEY,
    FrameError,
    body_offset,
    peek_header,
    response_frame,
)


async def dispatch(core: SimCore, node_id: int, frame: bytes, principal: str | None = None
                   ) -> bytes | None:
    header = peek_header(frame)
    spec = SUPPORTED.get(header.api_key)
    if spec is None:
        raise FrameError(f"unsupported api key {header.api_key} v{header.api_version}")
    version = header.api_version
    if not spec.min_version <= version <= spec.max_version:
        if header.api_key == API_VERSIONS_KEY:
            body = api_versions_body(errors.UNSUPPORTED_VERSION).encode(version=0)
            return response_frame(header.correlation_id, bytes(body), flexible_header=False)
        raise FrameError(
            f"unsupported version {version} of api key {header.api_key} "
            f"(supported {spec.min_version}..{spec.max_version})"
        )
    flexible = spec.flexible(version)
    try:
        start = body_offset(frame, flexible)
        request = spec.request.decode(memoryview(frame)[start:], version=version)
    except FrameError:
        raise
    except Exception as exc:  # the codec raises many types on garbage
        raise FrameError(
            f"cannot decode {spec.request.name} v{version}: {type(exc).__name__}: {exc}"
        ) from exc
    ctx = Ctx(core, node_id, version, header.client_id, principal)
    response = await HANDLERS[header.api_key](ctx, request)
    if response is None:
        return None
    body = response.encode(version=version)
    flexible_header = flexible and header.api_key != ApiVersionsResponse.API_KEY
    out = response_frame(header.correlation_id, bytes(body), flexible_header)
    if header.api_key == FETCH_KEY:
        core.count_fetch_frame(header.client_id, node_id, len(out))
    return out
