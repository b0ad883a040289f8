"""AsyncRedisStore against a real, private redis-server: the same sessions as RedisStore (sync and
async workers share one Redis), conflicts between async workers, failures, and the point of it:
a slow Redis does not stall the other tasks of the event loop.

Slowness is real: a TCP proxy on loopback (its own threads, off the loop under test) holds every
request for DELAY seconds before passing it to redis-server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

import loopwarden as lw
from test_redis_store import SECRET, RedisServer, _free_port

from _support import require_binary, require_module

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
DELAY = 0.3  # seconds the proxy holds each request
TICK = 0.01  # the ticker task's period


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    require_module("redis", "redis")
    binary = require_binary("redis-server", "apt-get install redis-server")
    redis_server = RedisServer(binary, _free_port(), tmp_path_factory.mktemp("redis-async"))
    redis_server.start()
    yield redis_server
    redis_server.stop()


@pytest.fixture()
def url(server: RedisServer) -> str:
    import redis

    client = redis.Redis.from_url(server.url)
    client.flushall()
    client.close()
    return server.url


def _async_store(url: str, **options: Any) -> Any:
    from loopwarden.stores.redis import AsyncRedisStore

    return AsyncRedisStore(url, **options)


def _sync_store(url: str, **options: Any) -> Any:
    from loopwarden.stores.redis import RedisStore

    return RedisStore(url, **options)


# A session's calls: (tool, params, result): a loop, then a ping-pong.
SCRIPT: list[tuple[str, dict[str, Any], str]] = [
    *[("exec", {"command": "npm test"}, "1 failing")] * 5,
    *[("read", {"path": f"f{i % 2}"}, f"text {i % 2}") for i in range(8)],
]


def _memory_decisions() -> list[tuple[str, str | None]]:
    guard = lw.LoopGuard(CONFIG)
    out = []
    for tool, params, result in SCRIPT:
        decision = guard.before_tool_call("s", tool, params, run_id="r")
        out.append((decision.action, decision.message))
        if decision.allowed:
            guard.after_tool_call("s", tool, params, result=result, run_id="r")
    return out


def test_sync_and_async_workers_share_one_session_and_decide_like_one_memory_guard(
    url: str,
) -> None:
    """Calls alternate between a RedisStore guard and an AsyncRedisStore guard."""
    sync_guard = lw.LoopGuard(CONFIG, store=_sync_store(url))
    async_guard = lw.LoopGuard(CONFIG, store=_async_store(url))

    async def main() -> list[tuple[str, str | None]]:
        out = []
        for i, (tool, params, result) in enumerate(SCRIPT):
            if i % 2:
                decision = sync_guard.before_tool_call("s", tool, params, run_id="r")
            else:
                decision = await async_guard.abefore_tool_call("s", tool, params, run_id="r")
            out.append((decision.action, decision.message))
            if decision.allowed:
                if i % 3:
                    await async_guard.aafter_tool_call("s", tool, params, result=result, run_id="r")
                else:
                    sync_guard.after_tool_call("s", tool, params, result=result, run_id="r")
        return out

    got = asyncio.run(main())
    assert got == _memory_decisions()
    assert {action for action, _ in got} >= {"warn", "block"}
    # Both read the same stored session.
    peeked = _sync_store(url).peek("s")
    apeeked = asyncio.run(_async_store(url).apeek("s"))
    assert peeked is not None and apeeked is not None
    assert peeked.state.history == apeeked.state.history


def test_concurrent_tasks_of_two_async_workers_lose_no_update(url: str) -> None:
    """Two stores (two workers' caches) and 10 tasks each on one session: every optimistic
    conflict is retried, so every call and outcome lands."""
    config = {"enabled": True, "historySize": 1000}
    guards = [lw.LoopGuard(config, store=_async_store(url)) for _ in range(2)]
    tasks, calls = 10, 10

    async def worker(guard: lw.LoopGuard, tag: str) -> None:
        for i in range(calls):
            params = {"worker": tag, "i": i}
            await guard.abefore_tool_call("s", "t", params, tool_call_id=f"{tag}-{i}")
            await guard.aafter_tool_call("s", "t", params, result=i, tool_call_id=f"{tag}-{i}")

    async def main() -> None:
        await asyncio.gather(
            *(worker(guards[n % 2], f"w{n}") for n in range(tasks)),
        )

    asyncio.run(main())
    state = _sync_store(url).peek("s")
    assert state is not None
    history = state.state.history
    assert len(history) == tasks * calls
    assert all(record.result_hash is not None for record in history)


def test_one_store_serves_several_event_loops(url: str) -> None:
    """asyncio.run twice (as Runner.run_sync does): a client per loop, no 'different loop' error."""
    guard = lw.LoopGuard(CONFIG, store=_async_store(url))
    params = {"command": "ls"}

    async def one_call() -> str:
        decision = await guard.abefore_tool_call("s", "exec", params)
        await guard.aafter_tool_call("s", "exec", params, result="same")
        return decision.action

    actions = [asyncio.run(one_call()) for _ in range(4)]
    assert actions == ["allow", "allow", "warn", "allow"]


def test_unreachable_redis_follows_the_store_error_policy_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = f"redis://alice:{SECRET}@127.0.0.1:{_free_port()}/0"
    allowing = lw.LoopGuard(CONFIG, store=_async_store(dead, timeout=0.5))
    blocking = lw.LoopGuard(CONFIG, store=_async_store(dead, timeout=0.5, on_store_error="block"))

    async def main() -> tuple[lw.Decision, lw.Decision]:
        return (
            await allowing.abefore_tool_call("s", "exec", {}),
            await blocking.abefore_tool_call("s", "exec", {}),
        )

    with caplog.at_level("ERROR", logger="loopwarden"):
        allowed, blocked = asyncio.run(main())
    assert allowed.action == "allow"
    assert blocked.action == "block" and blocked.message is not None
    assert "loop-detection state is unavailable" in blocked.message
    assert "Redis store at redis://***@127.0.0.1" in caplog.text
    assert SECRET not in caplog.text and "alice" not in caplog.text


# ---------------------------------------------------------------------------------------------
# A slow Redis and the other tasks of the loop


class SlowProxy:
    """A loopback TCP proxy to redis-server that holds each request for ``delay`` seconds.

    It runs in its own threads, so a blocked event loop under test cannot slow it down further.
    """

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, self.delay)).start()
            threading.Thread(target=self._pump, args=(upstream, client, 0.0)).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket, delay: float) -> None:
        try:
            while data := source.recv(65536):
                time.sleep(delay)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture()
def slow_url(url: str, server: RedisServer) -> Iterator[str]:
    proxy = SlowProxy(server.port, DELAY)
    yield proxy.url
    proxy.close()


async def _while_ticking(call: Callable[[], Awaitable[lw.Decision]]) -> tuple[float, int, str]:
    """Run ``call`` while a ticker task sleeps TICK at a time; the ticker's longest gap, its
    ticks during the call, and the call's action."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(5 * TICK)  # the ticker is running
    before = len(gaps)
    decision = await call()
    ticks = len(gaps) - before
    done.set()
    await task
    return max(gaps[before:], default=0.0), ticks, decision.action


def test_a_slow_redis_stalls_the_loop_only_through_the_sync_methods(slow_url: str) -> None:
    """The same first call (a read and an update, two delayed round trips) four ways."""
    params = {"command": "ls"}

    def sync_on_loop() -> tuple[float, int, str]:
        guard = lw.LoopGuard(CONFIG, store=_sync_store(slow_url, timeout=5))

        async def call() -> lw.Decision:
            return guard.before_tool_call("sync", "exec", params)  # blocks the loop

        return asyncio.run(_while_ticking(call))

    def awaited(store: Any, session: str) -> tuple[float, int, str]:
        guard = lw.LoopGuard(CONFIG, store=store)
        return asyncio.run(_while_ticking(lambda: guard.abefore_tool_call(session, "exec", params)))

    stalled_gap, stalled_ticks, stalled_action = sync_on_loop()
    async_gap, async_ticks, async_action = awaited(_async_store(slow_url, timeout=5), "async")
    # A sync RedisStore behind the async methods runs in a worker thread.
    thread_gap, thread_ticks, thread_action = awaited(_sync_store(slow_url, timeout=5), "thread")

    assert stalled_action == async_action == thread_action == "allow"
    # The sync call held the loop for both round trips: the ticker could not tick meanwhile.
    assert stalled_gap >= 2 * DELAY * 0.8, stalled_gap
    assert stalled_ticks <= 1
    # Awaited, the call takes as long, but the ticker keeps its pace throughout (margins are
    # generous: any gap below one delay means the loop was never held for a round trip).
    for gap, ticks in ((async_gap, async_ticks), (thread_gap, thread_ticks)):
        assert gap < DELAY * 0.7, gap
        assert ticks >= (2 * DELAY / TICK) * 0.3, ticks


def test_the_slow_proxy_really_delays_each_round_trip(slow_url: str) -> None:
    """The premise of the test above, measured on a plain client."""
    import redis

    client = redis.Redis.from_url(slow_url, socket_timeout=5)
    start = time.monotonic()
    client.ping()
    client.ping()
    elapsed = time.monotonic() - start
    client.close()
    assert elapsed >= 2 * DELAY * 0.9
