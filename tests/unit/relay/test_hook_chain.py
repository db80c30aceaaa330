"""proxy.relay.hook_chain: two hooks on one API compose into one answer."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.relay.actions import ClientInfo, Forward, Reply
from proxy.relay.hook_chain import chain
from proxy.relay.response_queue import ByteCount

CLIENT = ClientInfo("127.0.0.1:1", "bootstrap")


def call(hook: Any, frame: bytes = b"request") -> Any:
    return hook(CLIENT, memoryview(frame), 19, 5, 7)


def test_what_the_first_answers_itself_is_final() -> None:
    seen: list[bytes] = []

    def second(*args: Any) -> Any:
        seen.append(bytes(args[1]))
        return Forward(args[1])

    assert call(chain(lambda *a: Reply(b"refused"), second)) == Reply(b"refused")
    assert seen == []


def test_unchanged_forward_hands_the_same_request_to_the_second() -> None:
    passed = Forward(b"from-second", True, None)
    seen: list[bytes] = []

    def second(client: ClientInfo, frame: memoryview, *rest: int) -> Forward:
        seen.append(bytes(frame))
        return passed

    assert call(chain(lambda c, f, *r: Forward(f), second)) is passed
    assert seen == [b"request"]


def test_transforms_apply_second_then_first() -> None:
    first = chain(lambda c, f, *r: Forward(b"smaller", True, lambda a, v: bytes(a) + b"+first"),
                  lambda c, f, *r: Forward(bytes(f) + b"!", True,
                                           lambda a, v: bytes(a) + b"+second"))
    action = call(first)
    assert isinstance(action, Forward) and action.frame == b"smaller!"
    assert action.transform is not None
    assert action.transform(memoryview(b"answer"), 5) == b"answer+second+first"


def test_byte_counts_are_carried() -> None:
    """The second's count stays the relay's to keep (the answer as it arrives); the
    first's counts the answer as the first's transform sees it, after the second's."""
    first_count, second_count = ByteCount(), ByteCount()
    hook = chain(lambda c, f, *r: Forward(b"rest", True, None, first_count),
                 lambda c, f, *r: Forward(f, True, lambda a, v: bytes(a) + b"+second",
                                          second_count))
    action = call(hook)
    assert isinstance(action, Forward) and action.count is second_count
    assert action.transform is not None
    assert action.transform(memoryview(b"answer"), 5) == b"answer+second"
    assert (first_count.total, second_count.total) == (len(b"answer+second"), 0)
    replied = call(chain(lambda c, f, *r: Forward(b"rest", True, None, first_count),
                         lambda *a: Reply(b"local")))
    assert replied == Reply(b"local") and first_count.total == len(b"answer+second") + 5


def test_a_reply_of_the_second_goes_through_the_first_transform() -> None:
    hook = chain(lambda c, f, *r: Forward(b"rest", True, lambda a, v: bytes(a) + b"+merged"),
                 lambda *a: Reply(b"local"))
    assert call(hook) == Reply(b"local+merged")


def test_asynchronous_second_hook_and_transforms() -> None:
    async def later(data: bytes) -> bytes:
        await asyncio.sleep(0)
        return data

    async def second(client: ClientInfo, frame: memoryview, *rest: int) -> Forward:
        await asyncio.sleep(0)
        return Forward(bytes(frame), True, lambda a, v: later(bytes(a) + b"+second"))

    hook = chain(lambda c, f, *r: Forward(b"rest", True, lambda a, v: bytes(a) + b"+first"),
                 second)

    async def run() -> bytes:
        action = await call(hook)
        assert isinstance(action, Forward) and action.frame == b"rest"
        assert action.transform is not None
        return await action.transform(memoryview(b"answer"), 5)

    assert asyncio.run(run()) == b"answer+second+first"
