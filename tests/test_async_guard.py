"""LoopGuard's async methods: the same decisions as the sync ones, over async-capable stores.

The sync and async paths share every decision step; only the store transaction differs. These
tests drive both paths over the same call sequences and compare what comes out, then check what
the async path promises about the event loop: MemoryStore waits for a lock held by another
thread without blocking the loop, a sync-only store runs in a worker thread, and an async-only
store refuses the sync methods.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

import loopwarden as lw
from _async_only import AsyncOnlyStore
from loopwarden.store import GuardSession
from loopwarden.stores.sqlite import SQLiteStore

T = TypeVar("T")
CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4, "stopAfterBlocks": 2}
RECOMMENDED = {"profile": "recommended"}
FAIL = {"content": [{"type": "text", "text": "1 failing"}], "details": {"exitCode": 1}}

# A session's calls: (tool, params, result). Loops of each kind, then a call that is fine.
SCRIPT: list[tuple[str, dict[str, Any], Any]] = [
    *[("exec", {"command": "npm test"}, FAIL)] * 6,
    *[("read", {"path": f"f{i % 2}"}, f"text {i % 2}") for i in range(10)],
    ("search", {"q": "x"}, "found"),
]


def sync_run(guard: lw.LoopGuard, session: str = "s") -> list[tuple[str, str | None]]:
    """Every call of SCRIPT through the sync methods, as (action, message) per decision."""
    guard.start_run(session, "r")
    out = []
    for tool, params, result in SCRIPT:
        decision = guard.before_tool_call(session, tool, params, run_id="r")
        out.append((decision.action, decision.message))
        if decision.allowed:
            after = guard.after_tool_call(session, tool, params, result=result, run_id="r")
            out.append((after.action, after.message))
    record = guard.end_run(session, "r")
    out.append(("end", record.outcome if record else None))
    return out


async def async_run(guard: lw.LoopGuard, session: str = "s") -> list[tuple[str, str | None]]:
    """SCRIPT through the async methods."""
    await guard.astart_run(session, "r")
    out = []
    for tool, params, result in SCRIPT:
        decision = await guard.abefore_tool_call(session, tool, params, run_id="r")
        out.append((decision.action, decision.message))
        if decision.allowed:
            after = await guard.aafter_tool_call(session, tool, params, result=result, run_id="r")
            out.append((after.action, after.message))
    record = await guard.aend_run(session, "r")
    out.append(("end", record.outcome if record else None))
    return out


def events_of(guard: lw.LoopGuard) -> list[tuple[str, str, int]]:
    events: list[tuple[str, str, int]] = []
    guard.subscribe(lambda e: events.append((e.action, e.detector, e.count)))
    return events


@pytest.mark.parametrize("config", [CONFIG, RECOMMENDED], ids=["openclaw", "recommended"])
def test_async_methods_decide_exactly_as_the_sync_ones(config: dict[str, Any]) -> None:
    sync_guard, async_guard = lw.LoopGuard(config), lw.LoopGuard(config)
    sync_events, async_events = events_of(sync_guard), events_of(async_guard)

    expected = sync_run(sync_guard)
    got = asyncio.run(async_run(async_guard))

    assert got == expected
    assert {action for action, _ in expected} >= {"allow", "warn", "block"}  # loops were seen
    assert async_events == sync_events and async_events
    untimed = [replace(e, timestamp=0.0) for e in sync_guard.run_record("s", "r")]
    records = asyncio.run(async_guard.arun_record("s", "r"))
    assert [replace(e, timestamp=0.0) for e in records] == untimed and untimed


def test_sqlite_store_async_path_matches_and_persists(tmp_path: Path) -> None:
    expected = sync_run(lw.LoopGuard(CONFIG))
    store = SQLiteStore(tmp_path / "sessions.db")
    got = asyncio.run(async_run(lw.LoopGuard(CONFIG, store=store)))
    assert got == expected
    store.close()
    reopened = SQLiteStore(tmp_path / "sessions.db")
    state = reopened.peek("s")
    assert state is not None and len(state.state.history) > 0
    reopened.close()


def test_compaction_guard_armed_through_the_async_path_stops_the_run() -> None:
    guard = lw.LoopGuard({"postCompactionGuard": {"windowSize": 3}})

    async def scenario() -> list[str]:
        await guard.astart_run("s", "r")
        await guard.aon_compaction_retry("s", run_id="r")
        actions = []
        for _ in range(3):
            await guard.abefore_tool_call("s", "exec", {"command": "ls"}, run_id="r")
            after = await guard.aafter_tool_call(
                "s", "exec", {"command": "ls"}, result="same", run_id="r"
            )
            actions.append(after.action)
        return actions

    assert asyncio.run(scenario()) == ["allow", "allow", "stop"]


def test_concurrent_tasks_on_one_session_lose_no_call() -> None:
    guard = lw.LoopGuard({"enabled": True, "historySize": 1000})
    tasks, calls = 20, 25

    async def worker(n: int) -> None:
        for i in range(calls):
            params = {"task": n, "i": i}
            await guard.abefore_tool_call("s", "t", params)
            await asyncio.sleep(0)  # let the other tasks in between before and after
            await guard.aafter_tool_call("s", "t", params, result=i)

    async def main() -> None:
        await asyncio.gather(*(worker(n) for n in range(tasks)))

    asyncio.run(main())
    state = guard.store.peek("s")  # type: ignore[union-attr]
    assert state is not None
    history = state.state.history
    assert len(history) == tasks * calls
    assert all(r.result_hash is not None for r in history)  # every outcome found its call


def test_memory_store_waits_for_a_thread_without_blocking_the_loop() -> None:
    """A sync update in another thread holds the session; the loop keeps running meanwhile.

    The thread's update waits until the loop's ticker has ticked 20 times while the async
    update on the same session is pending. A blocking lock would freeze the loop, the ticker
    could not tick, and the thread's wait would time out first.
    """
    store = lw.MemoryStore()
    entered, release = threading.Event(), threading.Event()

    def hold(state: GuardSession) -> None:
        entered.set()
        release.wait(10)
        state.warning_buckets["held"] = 1

    holder = threading.Thread(target=store.update, args=("s", hold))
    holder.start()
    assert entered.wait(10)

    async def main() -> tuple[int, bool, int]:
        waiting = asyncio.create_task(store.aupdate("s", lambda s: s.warning_buckets.get("held")))
        ticks = 0
        while ticks < 20 and not waiting.done():
            await asyncio.sleep(0.001)
            ticks += 1
        pending = not waiting.done()
        release.set()
        return ticks, pending, await waiting

    ticks, pending_while_held, seen = asyncio.run(main())
    holder.join(10)
    assert (ticks, pending_while_held) == (20, True)
    assert seen == 1  # the async update ran after the thread's, on the state it left


class ThreadRecordingStore:
    """A sync-only store (no aupdate) that notes which thread runs each update."""

    def __init__(self) -> None:
        self.inner = lw.MemoryStore()
        self.threads: list[int] = []

    def update(self, key: str, fn: Callable[[GuardSession], T]) -> T:
        self.threads.append(threading.get_ident())
        return self.inner.update(key, fn)

    def peek(self, key: str) -> GuardSession | None:
        self.threads.append(threading.get_ident())
        return self.inner.peek(key)

    def __len__(self) -> int:
        return len(self.inner)


def test_a_sync_only_store_runs_in_a_worker_thread_on_the_async_path() -> None:
    store = ThreadRecordingStore()
    guard = lw.LoopGuard(CONFIG, store=store)

    async def main() -> tuple[int, list[tuple[str, str | None]]]:
        return threading.get_ident(), await async_run(guard)

    loop_thread, got = asyncio.run(main())
    assert got == sync_run(lw.LoopGuard(CONFIG))
    assert store.threads and loop_thread not in store.threads


def test_an_async_only_store_serves_the_async_methods_and_refuses_the_sync_ones() -> None:
    guard = lw.LoopGuard(CONFIG, store=AsyncOnlyStore())
    assert asyncio.run(async_run(guard)) == sync_run(lw.LoopGuard(CONFIG))
    with pytest.raises(TypeError, match="async-only"):
        guard.before_tool_call("s", "exec", {})
    with pytest.raises(TypeError, match="async-only"):
        guard.start_run("s")
    with pytest.raises(TypeError, match="async-only"):
        guard.run_record("s")


def test_a_failing_step_is_logged_and_the_call_allowed_on_the_async_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(AsyncOnlyStore):
        async def aupdate(self, key: str, fn: Callable[[GuardSession], T]) -> T:
            raise RuntimeError("disk on fire")

    guard = lw.LoopGuard(CONFIG, store=Broken())
    with caplog.at_level("ERROR", logger="loopwarden"):
        decision = asyncio.run(guard.abefore_tool_call("s", "exec", {}))
    assert decision.action == "allow"
    assert "loop accounting failed (before exec)" in caplog.text


def test_run_records_are_written_from_the_async_path(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db)
    events = events_of(guard)
    got = asyncio.run(async_run(guard))
    assert guard.recorder is not None
    guard.recorder.close()
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT session, run_key, outcome FROM runs").fetchall()
        actions = [row[0] for row in conn.execute("SELECT action FROM events ORDER BY id")]
    assert runs == [("s", "r", got[-1][1])]
    assert actions == [action for action, _, _ in events] == ["warn", "block", "stop"]
