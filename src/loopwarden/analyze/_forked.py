"""Worker processes for ``analyze --jobs``: forked children that send results back over pipes.

Lighter than ``concurrent.futures.ProcessPoolExecutor`` (whose import alone, with
multiprocessing's, is a sizeable share of a short run's start-up, carried into every worker):
the children are forked with the tasks already in memory, so only a task's number goes to them
(through one shared pipe they take numbers from, which balances the load) and only the pickled
result comes back (one pipe per child). Results are yielded in task order.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import struct
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

_INDEX = struct.Struct("<i")
_FRAME = struct.Struct("<iQ")  # the task's number (-1: the worker failed), the payload's length

MAX_TASKS = 1024
"""The task numbers are all written to the shared pipe before the children start: 4 KB, the
least buffer a pipe has. Callers with more tasks use another pool."""


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker (its ``__cause__`` in this process)."""


def forked_map(func: Callable[[_T], _R], tasks: Sequence[_T], workers: int) -> Iterator[_R]:
    """``func(task)`` for every task, run in ``workers`` forked children, yielded in order.

    An exception raised in a child is raised here (with the child's traceback as its cause);
    a child that ends without sending its results raises :class:`RuntimeError` saying how it
    ended. Closing the iterator early stops the children.
    """
    if len(tasks) > MAX_TASKS:
        raise ValueError(f"at most {MAX_TASKS} tasks, got {len(tasks)}")
    for stream in (sys.stdout, sys.stderr):  # what is buffered is written once, not per child
        stream.flush()
    queue, feed = os.pipe()
    os.write(feed, b"".join(_INDEX.pack(number) for number in range(len(tasks))))
    os.close(feed)  # the children read to the end of the numbers, then stop
    children: dict[int, int] = {}  # result pipe -> child's pid
    # The objects the children inherit (modules, configs, tasks) are moved out of the
    # collector's reach for the forks: a child's collections then neither walk them (time)
    # nor touch their pages (copied on write). This process takes them back once forked.
    gc.freeze()
    try:
        try:
            for _ in range(workers):
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child: never returns
                    for other in [read, *children]:
                        os.close(other)
                    _work(func, tasks, queue, write)
                os.close(write)
                children[read] = pid
        finally:
            gc.unfreeze()
        os.close(queue)
        yield from _collect(children, len(tasks))
    finally:
        _stop(children)


def _work(func: Callable[[_T], _R], tasks: Sequence[_T], queue: int, out: int) -> None:
    """A child's loop: take task numbers until there are none, send each result back."""
    code = 0
    try:
        while raw := os.read(queue, _INDEX.size):
            (number,) = _INDEX.unpack(raw)
            _send(out, number, pickle.dumps(func(tasks[number]), pickle.HIGHEST_PROTOCOL))
    except BaseException as exc:  # sent back to be raised in the parent
        code = 1
        text = "".join(traceback.format_exception(exc))
        try:
            failure = pickle.dumps((exc, text))
        except Exception:  # an exception that does not pickle: its text still goes back
            failure = pickle.dumps((RuntimeError(f"{type(exc).__name__}: {exc}"), text))
        with contextlib.suppress(BaseException):  # the parent gone: nobody to tell
            _send(out, -1, failure)
    finally:
        os._exit(code)  # no clean-up of the parent's state (atexit, buffers) in a child


def _send(out: int, number: int, payload: bytes) -> None:
    view = memoryview(_FRAME.pack(number, len(payload)) + payload)
    while view:
        view = view[os.write(out, view) :]


def _collect(children: dict[int, int], count: int) -> Iterator[_R]:
    """Read every child's frames as they come; yield the results in task order."""
    pending: dict[int, bytearray] = {read: bytearray() for read in children}
    done: dict[int, _R] = {}
    following = 0
    while following < count:
        if following in done:
            yield done.pop(following)
            following += 1
            continue
        if not pending:
            raise RuntimeError(_lost(children))
        ready, _, _ = select.select(list(pending), [], [])
        for read in ready:
            data = os.read(read, 1 << 20)
            if not data:
                del pending[read]
                continue
            buffer = pending[read]
            buffer += data
            done.update(_frames(buffer))


def _frames(buffer: bytearray) -> Iterator[tuple[int, _R]]:
    """The whole frames at the start of ``buffer`` (taken out of it), unpickled."""
    while len(buffer) >= _FRAME.size:
        number, length = _FRAME.unpack_from(buffer)
        end = _FRAME.size + length
        if len(buffer) < end:
            return
        payload = bytes(buffer[_FRAME.size : end])
        del buffer[:end]
        if number < 0:
            exc, text = pickle.loads(payload)
            raise exc from WorkerTraceback(f"\n\nIn the worker process:\n{text}")
        yield number, pickle.loads(payload)


def _lost(children: dict[int, int]) -> str:
    """Why results are missing: how the children ended."""
    endings = []
    for pid in children.values():
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            endings.append(f"pid {pid}: {how}")
    said = "; ".join(endings) or "all exited normally"
    return f"a worker process ended without sending its results ({said})"


def _stop(children: dict[int, int]) -> None:
    """Close the result pipes and reap the children (stopped first when still running)."""
    for read, pid in children.items():
        os.close(read)
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
            if waited == 0:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # already reaped
