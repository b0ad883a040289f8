"""The relay's line reader and pump over a real pipe: lines whole and in order, reading paused
while too many wait for the relay (backpressure), never while a long line is still arriving;
a line whose handling must wait holds the later ones back until it is done, in order."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from loopwarden.mcp_proxy._downstream import CHUNK, LineProtocol, LinePump, LineReader


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _read_pipe(data: bytes, *, slow: bool, inline: bool = True) -> tuple[list[bytes], bool]:
    """Lines read from a pipe ``data`` is written into; whether reading paused meanwhile.

    ``slow``: handling the first line waits until the writer is held up (the relay busy with
    a message, e.g. on a full pipe), so whole lines pile up behind it.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    lines = LineReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: LineProtocol(lines), os.fdopen(read_fd, "rb", closefd=True)
    )

    def writer() -> None:
        _write_all(write_fd, data)
        os.close(write_fd)

    thread = threading.Thread(target=writer)
    paused = False
    got: list[bytes] = []
    ended: asyncio.Future[BaseException | None] = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    async def handle(line: bytes) -> None:
        nonlocal paused
        if slow and not got:
            for _ in range(200):
                await asyncio.sleep(0.01)
                if not transport.is_reading() and thread.is_alive():  # the writer waits
                    paused = True
                    break
        got.append(line)

    async def end(exc: BaseException | None) -> None:
        ended.set_result(exc)

    def spawn(work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    LinePump(lines, handle, end, spawn, inline=inline)
    thread.start()
    try:
        assert await ended is None
    finally:
        transport.close()
        await asyncio.to_thread(thread.join)
    return got, paused


@pytest.mark.parametrize("inline", [True, False])
def test_many_waiting_lines_pause_reading_and_all_arrive_in_order(inline: bool) -> None:
    sent = [b'{"id":%d,"text":"%s"}' % (n, b"x" * 200) for n in range(20_000)]  # about 4.4 MB
    data = b"\n".join(sent) + b"\n\n  \n"
    got, paused = asyncio.run(_read_pipe(data, slow=True, inline=inline))
    assert got == sent
    assert paused  # more than 2 MiB waited in whole lines: the pipe was left to fill


def test_a_line_longer_than_the_pause_threshold_arrives_whole() -> None:
    long_line = b'{"id":1,"text":"' + b"y" * (3 * CHUNK) + b'"}'
    # Reading never pauses on a line still arriving (it would wait for itself: a hang).
    got, _ = asyncio.run(
        asyncio.wait_for(_read_pipe(long_line + b"\n" + b'{"id":2}', slow=False), 60)
    )
    assert got == [long_line, b'{"id":2}']  # the last line, without its newline, still counts
