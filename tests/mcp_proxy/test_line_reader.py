"""The relay's line reader over a real pipe: lines whole and in order, reading paused while too
many wait for the relay (backpressure), never while a long line is still arriving."""

from __future__ import annotations

import asyncio
import os
import threading

from loopwarden.mcp_proxy._downstream import CHUNK, LineProtocol, LineReader


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _read_pipe(data: bytes, *, slow: bool) -> tuple[list[bytes], bool]:
    """Lines read from a pipe ``data`` is written into; whether reading paused meanwhile."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    lines = LineReader(loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: LineProtocol(lines), os.fdopen(read_fd, "rb", closefd=True)
    )

    def writer() -> None:
        _write_all(write_fd, data)
        os.close(write_fd)

    thread = threading.Thread(target=writer)
    thread.start()
    paused = False
    got: list[bytes] = []
    try:
        if slow:  # the relay busy elsewhere: whole lines pile up
            for _ in range(200):
                await asyncio.sleep(0.01)
                if not transport.is_reading() and thread.is_alive():  # the writer waits
                    paused = True
                    break
        while (line := await lines.next()) is not None:
            got.append(line)
    finally:
        transport.close()
        await asyncio.to_thread(thread.join)
    return got, paused


def test_many_waiting_lines_pause_reading_and_all_arrive_in_order() -> None:
    sent = [b'{"id":%d,"text":"%s"}' % (n, b"x" * 200) for n in range(20_000)]  # about 4.4 MB
    got, paused = asyncio.run(_read_pipe(b"\n".join(sent) + b"\n\n  \n", slow=True))
    assert got == sent
    assert paused  # more than 2 MiB waited in whole lines: the pipe was left to fill


def test_a_line_longer_than_the_pause_threshold_arrives_whole() -> None:
    long_line = b'{"id":1,"text":"' + b"y" * (3 * CHUNK) + b'"}'
    # Reading never pauses on a line still arriving (it would wait for itself: a hang).
    got, _ = asyncio.run(
        asyncio.wait_for(_read_pipe(long_line + b"\n" + b'{"id":2}', slow=False), 60)
    )
    assert got == [long_line, b'{"id":2}']  # the last line, without its newline, still counts
