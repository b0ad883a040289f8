"""Benchmark: the hook client's timeouts against what a healthy and a hung hook server take.

Run from the repository root (Linux):

    python bench/bench_hook_hang.py [--python PY] [--rounds 200] [--burst 12]

The hook process waits ``_client.TAKE_SECONDS`` for the resident server to take its connection
and ``_client.ANSWER_SECONDS`` for the answer, then handles the event alone and replaces the
server. This measures what those waits are set against, with a real server started by a real
hook process (``XDG_STATE_HOME`` in a temporary folder):

1. a healthy server, one request at a time: the time to be taken, and to be answered
   (a fresh ``PreToolUse`` each time, as the client sends it);
2. a burst: ``--burst`` requests at once (the CLIs start the hooks of parallel tool calls
   together; the server serves one connection at a time), the same two times;
3. a whole hook process (``python -m loopwarden hook claude-code``) against a healthy server,
   one stopped with SIGSTOP, and one busy with a request that never ends: its wall time.

The first two are the margins: the slowest take and answer seen against 0.5 s and 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENT = ROOT / "tests" / "data" / "coding_agents" / "claude-code" / "hook-events"


def _event(n: int) -> bytes:
    event = json.loads((EVENT / "PreToolUse.json").read_text())
    event["tool_input"] = {**event["tool_input"], "command": f"echo step {n}"}
    event["tool_use_id"] = f"bench_{n:06d}"
    return json.dumps(event).encode()


def _hook(py: str, env: dict[str, str], n: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [py, "-m", "loopwarden", "hook", "claude-code"],
        input=_event(n),
        env=env,
        capture_output=True,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode or done.stderr:
        sys.exit(f"hook failed: {done.returncode} {done.stderr.decode()[:500]}")
    return took


def _socket(state: Path) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in (state / "loopwarden").glob("hookd-*.sock"):
            return path
        time.sleep(0.05)
    sys.exit("no hook server started")


def _pid(path: Path) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(path))
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[:4], sys.byteorder)


def _exchange(path: Path, request: bytes) -> tuple[float, float]:
    """(seconds to be taken, seconds from the request to the whole answer), as the client."""
    from loopwarden.hooks._client import TAKEN

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        start = time.perf_counter()
        sock.connect(str(path))
        assert sock.recv(1) == TAKEN
        taken = time.perf_counter()
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(1 << 16):
            pass
        return taken - start, time.perf_counter() - taken


def _row(name: str, values: list[float]) -> None:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    print(
        f"{name:44} n={len(ms):4} median {statistics.median(ms):8.2f} ms  "
        f"p99 {p99:8.2f} ms  max {ms[-1]:8.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the loopwarden's interpreter")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--burst", type=int, default=12)
    parser.add_argument("--hooks", type=int, default=10, help="hook processes per server state")
    args = parser.parse_args()
    from loopwarden.hooks import _client

    print(f"TAKE_SECONDS={_client.TAKE_SECONDS}  ANSWER_SECONDS={_client.ANSWER_SECONDS}")
    with tempfile.TemporaryDirectory(prefix="lw-hang-") as temp:
        state = Path(temp) / "state"
        env = dict(os.environ, XDG_STATE_HOME=str(state), LOOPWARDEN_HOOK_IDLE="60")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        n = 0
        _hook(args.python, env, n)
        path = _socket(state)
        os.environ.update(XDG_STATE_HOME=str(state))  # encode_request reads LOOPWARDEN_* only
        cwd = os.getcwd()
        os.chdir(temp)

        def request(k: int) -> bytes:
            return _client.encode_request(["claude-code"], _event(k))

        for k in range(5):  # warm: the server imports the guard at its first event
            _exchange(path, request(10_000 + k))
        one = [_exchange(path, request(20_000 + k)) for k in range(args.rounds)]
        _row("healthy, one at a time: taken", [t for t, _ in one])
        _row("healthy, one at a time: answered", [a for _, a in one])
        burst: list[tuple[float, float]] = []
        with ThreadPoolExecutor(args.burst) as pool:
            for r in range(max(1, args.rounds // args.burst)):
                base = 30_000 + r * args.burst
                burst += pool.map(
                    lambda k: _exchange(path, request(k)), range(base, base + args.burst)
                )
        _row(f"burst of {args.burst}: taken", [t for t, _ in burst])
        _row(f"burst of {args.burst}: answered", [a for _, a in burst])
        os.chdir(cwd)

        n = 40_000
        healthy = [_hook(args.python, env, n + k) for k in range(args.hooks)]
        _row("hook process, healthy server", healthy)
        pid = _pid(path)
        os.kill(pid, signal.SIGSTOP)
        try:
            stopped = [_hook(args.python, env, n + 100 + k) for k in range(args.hooks)]
        finally:
            os.kill(pid, signal.SIGCONT)
        _row("hook process, server stopped (SIGSTOP)", stopped[:1])
        _row("  the hooks after it (a new server)", stopped[1:])
        path = _socket(state)
        time.sleep(0.5)
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.connect(str(path))
        slow.recv(1)
        slow.sendall(b"17:loopwarden-hook-2")  # and never the rest
        try:
            busy = [_hook(args.python, env, n + 200 + k) for k in range(args.hooks)]
        finally:
            slow.close()
        _row("hook process, server busy (endless request)", busy[:1])
        _row("  the hooks after it (a new server)", busy[1:])


if __name__ == "__main__":
    main()
