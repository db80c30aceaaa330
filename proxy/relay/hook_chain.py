"""Two request hooks on one API, one after the other (``chain(first, second)``).

``first`` sees the client's request. What it answers itself (``Reply``) is final;
what it forwards is handed to ``second`` as if the client had sent it, and
``second``'s action is what happens, with ``first``'s response transform applied to
whatever answer comes back, ``second``'s own transform (or reply) first (and ``first``'s
byte count and answer reader, if it names them, seeing that answer as its transform
does). So a filter that refuses some topics of a request (``first``) composes with a
hook that rewrites the rest (``second``), and the client gets one answer carrying both.

Invariant: ``first`` is synchronous (it returns an ``Action``); ``second`` and
either transform may be asynchronous, as any hook and transform may be. A request
``first`` forwards unchanged without a transform reaches ``second`` as the same
bytes, so chaining costs nothing beyond ``first``'s own decision.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from proxy.relay.actions import Action, ClientInfo, Forward, Reply, RequestHook
from proxy.relay.response_queue import AnswerReader, ByteCount, ResponseTransform

FirstHook = Callable[[ClientInfo, memoryview, int, int, int], Action]


def chain(first: FirstHook, second: RequestHook) -> RequestHook:
    def hook(client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
             corr: int) -> Action | Awaitable[Action]:
        action = first(client, frame, api_key, api_version, corr)
        if isinstance(action, Reply):
            return action
        outer = action.transform
        if action.count is not None:
            outer = _counted(action.count, outer)
        if action.read is not None:
            outer = _read(action.read, outer)
        view = action.frame if isinstance(action.frame, memoryview) else memoryview(action.frame)
        inner = second(client, view, api_key, api_version, corr)
        if outer is None:
            return inner
        if isinstance(inner, Reply | Forward):
            return _wrap(inner, outer, api_version)
        return _wrap_later(inner, outer, api_version)

    return hook


async def _wrap_later(pending: Awaitable[Action], outer: ResponseTransform,
                      version: int) -> Action:
    inner = await pending
    wrapped = _wrap(inner, outer, version)
    return await wrapped if inspect.isawaitable(wrapped) else wrapped


def _wrap(inner: Action, outer: ResponseTransform, version: int) -> Action | Awaitable[Action]:
    if isinstance(inner, Reply):
        done = outer(memoryview(inner.frame), version)
        if inspect.isawaitable(done):
            return _reply_later(done)
        return Reply(_bytes(done))
    return Forward(inner.frame, inner.expect_response, _compose(inner.transform, outer),
                   inner.count, inner.read)


def _counted(count: ByteCount, transform: ResponseTransform | None) -> ResponseTransform:
    def counting(frame: memoryview, version: int) -> object:
        count.total += len(frame)
        return frame if transform is None else transform(frame, version)

    return counting


def _read(read: AnswerReader, transform: ResponseTransform | None) -> ResponseTransform:
    def reading(frame: memoryview, version: int) -> object:
        read(frame, version)
        return frame if transform is None else transform(frame, version)

    return reading


async def _reply_later(pending: Awaitable[object]) -> Action:
    return Reply(_bytes(await pending))


def _compose(inner: ResponseTransform | None, outer: ResponseTransform) -> ResponseTransform:
    if inner is None:
        return outer

    def both(frame: memoryview, version: int) -> object:
        middle = inner(frame, version)
        if inspect.isawaitable(middle):
            return _then(middle, outer, version)
        return outer(_view(middle), version)

    return both


async def _then(pending: Awaitable[object], outer: ResponseTransform, version: int) -> bytes:
    result = outer(_view(await pending), version)
    if inspect.isawaitable(result):
        result = await result
    return _bytes(result)


def _view(data: object) -> memoryview:
    return data if isinstance(data, memoryview) else memoryview(_bytes(data))


def _bytes(data: object) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"a response transform returned {type(data).__name__}, not bytes")
