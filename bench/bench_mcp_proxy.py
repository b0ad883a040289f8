"""Benchmark: what ``loopwarden mcp-proxy`` adds to a ``tools/call`` over stdio.

Run from the repository root:

    python bench/bench_mcp_proxy.py                  # every server, 1000 interleaved calls each
    python bench/bench_mcp_proxy.py --servers trivial,everything --baseline-ref HEAD~3
    python bench/bench_mcp_proxy.py --calls 3000 --sizes 10,20 --json out/mcp_proxy.json

For each server, the ways to reach it are measured in one run, interleaved:

1. **direct**: the server itself;
2. **proxy**: ``python -m loopwarden mcp-proxy -- <server>`` from this checkout;
3. **baseline** (``--baseline-ref``): the same command from another version of the proxy, its
   source taken from git into a temporary folder (``auto``: the SDK-based proxy the byte relay
   replaced; ``none``: no baseline, the default);
4. **direct, new session** (``--setsid``): the server started in a session of its own, as the
   proxy used to start it: on kernels with automatic scheduler groups (autogroup) that alone
   changes the server's latency.

The servers (``--servers``): ``trivial``, a JSON-RPC loop in plain Python that answers at once
(what remains is the proxy's own cost and the pipes'); ``python``, the test server
(``tests/mcp_proxy/server.py``, the official Python SDK's FastMCP); ``everything`` and
``filesystem``, the MCP reference servers on Node.js (``npm ci --prefix tests/mcp_proxy/servers``;
skipped when missing).

The client is a plain JSON-RPC client over pipes in this process (no SDK), so the figures are
the servers' and the proxy's, not a client library's. Detection is on (the proxy's default
profile); every call has different arguments, so the guard checks each call and never blocks.

**Latency.** After a warm-up, each round makes one call through every case, in a rotating order
(interleaved: a noisy moment hits all cases alike). The table gives p50/p99 of the round-trip
time and the added p50/p99 against direct (the difference of the percentiles).

**Instructions** (``--instructions 200,600``, Linux with valgrind). The proxy's CPU work per
``tools/call``, the same whatever the machine's load: the proxy (and the baseline) in front of
the trivial server, run under callgrind for each number of calls; the difference of the
instruction counts divided by the difference of the calls is the cost of one call, start-up
cancelled out. Beside each, the same count for the guard alone: the proxy's ``CallGuard``
checking and recording the same calls in one process, with no pipes and no relay. Give the
real interpreter, not a pyenv shim, to run it: callgrind counts the process it starts.

**Large results** (``--sizes``, the ``python`` server only). The ``blob`` tool returns that
many MB of text. For each size every case is timed ``--large-repeats`` times, interleaved; the
table gives the median wall time from request to the last byte of the answer, the ratio to
direct, and the peak RSS (``VmHWM``) of the process the client talks to, read at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "mcp_proxy" / "server.py"
NPM_BIN = ROOT / "tests" / "mcp_proxy" / "servers" / "node_modules" / ".bin"
MB = 1_000_000

# A server that costs next to nothing: whatever the proxy adds is all that is left.
TRIVIAL = r"""
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities":
                  {"tools": {}}, "serverInfo": {"name": "trivial", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        text = message["params"]["arguments"]["text"]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())
    out.write(b"\n")
    out.flush()
"""


# The guard's part of a call through the proxy, alone: CallGuard.before and .after, as the
# relay calls them, for calls like the trivial server's (the proxy's default profile).
GUARD_ALONE = r"""
import asyncio, sys
from loopwarden.core.config import resolve_config
from loopwarden.guard import LoopGuard
from loopwarden.mcp_proxy._guarding import CallGuard, outcome_of

async def main(calls):
    guard = CallGuard(LoopGuard(resolve_config({"profile": "recommended"})), "bench")
    for n in range(calls):
        params = {"name": "echo", "arguments": {"text": f"call {n}"}}
        _, call, _ = await guard.before(str(n), params)
        result = {"content": [{"type": "text", "text": f"call {n}"}], "isError": False}
        value, error = outcome_of(result)
        await guard.after(call, result=value, error=error)

asyncio.run(main(int(sys.argv[1])))
"""


@dataclass(frozen=True)
class Server:
    """One server to measure: how to start it and the ``tools/call`` params of call ``n``."""

    name: str
    argv: list[str]
    call: Callable[[int], dict[str, Any]]
    large: bool = False  # has the ``blob`` tool


def servers(names: list[str], scratch: Path) -> list[Server]:
    """The servers asked for that can run here (a missing npm server is skipped, said so)."""
    python = [sys.executable]
    files = scratch / "files"
    files.mkdir()
    for i in range(_FILES):
        (files / f"note{i}.txt").write_text(f"note {i}\n", encoding="utf-8")
    known = {
        "trivial": Server("trivial", [*python, "-c", TRIVIAL], _echo("text")),
        "python": Server("python", [*python, str(SERVER)], _echo("text"), large=True),
        "everything": Server(
            "everything", [str(NPM_BIN / "mcp-server-everything")], _echo("message")
        ),
        "filesystem": Server(
            "filesystem",
            [str(NPM_BIN / "mcp-server-filesystem"), str(files)],
            lambda n: {
                "name": "read_text_file",
                "arguments": {"path": str(files / f"note{n % _FILES}.txt")},
            },
        ),
    }
    chosen = []
    for name in names:
        if name not in known:
            raise SystemExit(f"unknown server {name!r}; choose from {', '.join(known)}")
        server = known[name]
        if server.argv[0].startswith(str(NPM_BIN)) and not Path(server.argv[0]).exists():
            print(f"{name}: skipped, run npm ci --prefix tests/mcp_proxy/servers", file=sys.stderr)
            continue
        chosen.append(server)
    return chosen


_FILES = 200  # files read in turn: never the same call twice within the guard's history


def _echo(key: str) -> Callable[[int], dict[str, Any]]:
    return lambda n: {"name": "echo", "arguments": {key: f"call {n}"}}


@dataclass
class Peer:
    """One started process the client talks JSON-RPC to."""

    name: str
    proc: subprocess.Popen[bytes]
    next_id: int = 1
    rtts: list[float] = field(default_factory=list)
    large: dict[int, list[float]] = field(default_factory=dict)

    def request(self, method: str, params: dict[str, Any]) -> tuple[float, int]:
        """Send one request; (seconds until its answer was read, bytes of the answer)."""
        stdin, stdout = self._pipes()
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        start = time.perf_counter()
        stdin.write(line.encode() + b"\n")
        stdin.flush()
        while True:
            answer = stdout.readline()
            if not answer:
                raise RuntimeError(f"{self.name}: the process closed its stdout")
            # Notifications (log messages) may come first; the answer carries our id.
            if b'"id"' in answer[:64] or b'"id"' in answer[-64:]:
                elapsed = time.perf_counter() - start
                message = json.loads(answer)
                if message.get("id") == request_id:
                    if "error" in message or message["result"].get("isError"):
                        raise RuntimeError(f"{self.name}: {method} failed: {answer[:300]!r}")
                    return elapsed, len(answer)

    def notify(self, method: str) -> None:
        stdin, _ = self._pipes()
        stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        stdin.flush()

    def peak_rss_mb(self) -> float:
        """VmHWM of the process (Linux), in MB."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return float("nan")
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / MB
        return float("nan")

    def close(self, timeout: float = 15) -> None:
        stdin, _ = self._pipes()
        stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout


def start(name: str, argv: list[str], env: dict[str, str], *, setsid: bool = False) -> Peer:
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=setsid,
    )
    peer = Peer(name, proc)
    peer.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench_mcp_proxy", "version": "0"},
        },
    )
    peer.notify("notifications/initialized")
    peer.request("tools/list", {})
    return peer


def baseline_source(ref: str, into: Path) -> Path | None:
    """Extract ``src/`` of ``ref`` into ``into``; None when git or the ref is missing."""
    if ref == "none":
        return None
    if ref == "auto":
        # The commit that removed the SDK's ServerSession from the proxy: its parent is the
        # last proxy built on the SDK session pair.
        found = subprocess.run(
            [
                "git",
                "log",
                "-1",
                "--format=%H",
                "-S",
                "from mcp.server.session import ServerSession",
                "--",
                "src/loopwarden/mcp_proxy/_proxy.py",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode != 0 or not found.stdout.strip():
            return None
        ref = found.stdout.strip() + "~1"
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "src/loopwarden"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        print(f"baseline: git archive {ref} failed; measuring without it", file=sys.stderr)
        return None
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="trivial,python,everything,filesystem")
    parser.add_argument("--calls", type=int, default=1000, help="measured calls per case")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--sizes", default="", help="large result sizes in MB (python server)")
    parser.add_argument("--large-repeats", type=int, default=3)
    parser.add_argument("--baseline-ref", default="none", help="git ref of another proxy, auto")
    parser.add_argument("--setsid", action="store_true", help="add direct, in a new session")
    parser.add_argument(
        "--sdk-client", action="store_true", help="large results via the SDK client too"
    )
    parser.add_argument(
        "--instructions",
        default="",
        help="two call counts, e.g. 200,600: instructions per call under callgrind, no latency",
    )
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()

    figures: dict[str, Any] = {
        "calls": args.calls,
        "python": sys.version.split()[0],
        "load_before": os.getloadavg()[0],
        "servers": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-mcp-proxy-") as tmp:
        base_src = baseline_source(args.baseline_ref, Path(tmp) / "baseline")
        plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proxy_env = {**plain, "PYTHONPATH": str(ROOT / "src")}
        if args.instructions:
            envs = {"proxy": proxy_env}
            if base_src is not None:
                envs["baseline"] = {**plain, "PYTHONPATH": str(base_src)}
            counts = [int(n) for n in args.instructions.split(",")]
            figures["instructions"] = instructions(envs, counts, Path(tmp))
            report_instructions(figures)
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(figures, indent=2) + "\n")
            return
        for server in servers(args.servers.split(","), Path(tmp)):
            proxy = [sys.executable, "-m", "loopwarden", "mcp-proxy", "--", *server.argv]
            argvs = {"direct": (server.argv, plain), "proxy": (proxy, proxy_env)}
            if base_src is not None:
                argvs["baseline"] = (proxy, {**plain, "PYTHONPATH": str(base_src)})
            peers = [start(name, argv, env) for name, (argv, env) in argvs.items()]
            if args.setsid:
                peers.append(start("direct-setsid", server.argv, plain, setsid=True))
            try:
                figures["servers"][server.name] = measure(server, peers, args)
            finally:
                for peer in peers:
                    peer.close()
            if server.large and args.sdk_client and args.sizes:
                figures["servers"][server.name]["sdk_client_large"] = sdk_client_large(argvs, args)
    figures["load_after"] = os.getloadavg()[0]
    report(figures)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def instructions(
    envs: dict[str, dict[str, str]], counts: list[int], scratch: Path
) -> dict[str, dict[str, float]]:
    """Instructions of the proxy process per ``tools/call`` (trivial server), for each case."""
    if len(counts) != 2 or counts[0] >= counts[1]:
        raise SystemExit("--instructions takes two call counts, the smaller first, e.g. 200,600")
    server = [sys.executable, "-c", TRIVIAL]
    measured: dict[str, dict[str, float]] = {}
    for name, env in envs.items():
        totals = []
        alone = []
        for calls in counts:
            out = scratch / f"callgrind.{name}.{calls}"
            proxy = [sys.executable, "-m", "loopwarden", "mcp-proxy", "--", *server]
            peer = start(name, [*_callgrind(out), *proxy], env)
            for n in range(calls):
                peer.request("tools/call", _echo("text")(n))
            peer.close(timeout=600)
            totals.append(_callgrind_total(out))
            out = scratch / f"callgrind.{name}.guard.{calls}"
            guard = [*_callgrind(out), sys.executable, "-c", GUARD_ALONE, str(calls)]
            subprocess.run(guard, env=env, check=True, capture_output=True)
            alone.append(_callgrind_total(out))
        span = counts[1] - counts[0]
        measured[name] = {
            "per_call": (totals[1] - totals[0]) / span,
            "guard_alone_per_call": (alone[1] - alone[0]) / span,
            **{f"total_{calls}": float(total) for calls, total in zip(counts, totals, strict=True)},
        }
    return measured


def _callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + str(out)]


def _callgrind_total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"{path}: no instruction total (did valgrind run?)")


def report_instructions(figures: dict[str, Any]) -> None:
    print("instructions of the proxy process per tools/call (callgrind, trivial server)")
    for name, measured in figures["instructions"].items():
        totals = ", ".join(
            f"{k[6:]} calls {v:,.0f}" for k, v in measured.items() if k.startswith("total_")
        )
        print(f"{name:<10} {measured['per_call']:>12,.0f} per call   ({totals})")
        print(f"{'':<10} {measured['guard_alone_per_call']:>12,.0f} of them the guard's (alone)")


def measure(server: Server, peers: list[Peer], args: argparse.Namespace) -> dict[str, Any]:
    for round_no in range(args.warmup + args.calls):
        order = peers[round_no % len(peers) :] + peers[: round_no % len(peers)]
        for peer in order:
            elapsed, _ = peer.request("tools/call", server.call(round_no))
            if round_no >= args.warmup:
                peer.rtts.append(elapsed)
    sizes = [int(size) for size in args.sizes.split(",") if size] if server.large else []
    for size in sizes:
        for repeat in range(args.large_repeats):
            order = peers[repeat % len(peers) :] + peers[: repeat % len(peers)]
            for peer in order:
                elapsed, length = peer.request(
                    "tools/call", {"name": "blob", "arguments": {"size": size * MB}}
                )
                assert length > size * MB
                peer.large.setdefault(size, []).append(elapsed)
    direct = peers[0]
    cases: dict[str, Any] = {}
    for peer in peers:
        p50, p99 = percentile(peer.rtts, 50) * 1e3, percentile(peer.rtts, 99) * 1e3
        large = {
            str(size): {
                "seconds": statistics.median(times),
                "vs_direct": statistics.median(times) / statistics.median(direct.large[size]),
            }
            for size, times in peer.large.items()
        }
        cases[peer.name] = {
            "p50_ms": p50,
            "p99_ms": p99,
            "added_p50_ms": p50 - percentile(direct.rtts, 50) * 1e3,
            "added_p99_ms": p99 - percentile(direct.rtts, 99) * 1e3,
            "large": large,
            "peak_rss_mb": peer.peak_rss_mb(),
        }
    return {"cases": cases}


def sdk_client_large(
    argvs: dict[str, tuple[list[str], dict[str, str]]], args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """Median seconds of one large ``call_tool`` through the official Python client (mcp)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def once(argv: list[str], env: dict[str, str], size: int) -> float:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                start = time.perf_counter()
                result = await session.call_tool("blob", {"size": size * MB})
                elapsed = time.perf_counter() - start
                assert not result.isError
                return elapsed

    times: dict[str, dict[int, list[float]]] = {name: {} for name in argvs}
    sizes = [int(size) for size in args.sizes.split(",") if size]
    names = list(argvs)
    for size in sizes:
        for repeat in range(args.large_repeats):
            for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                argv, env = argvs[name]
                elapsed = anyio.run(once, argv, env, size)
                times[name].setdefault(size, []).append(elapsed)
    return {
        name: {str(size): statistics.median(values) for size, values in by_size.items()}
        for name, by_size in times.items()
    }


def report(figures: dict[str, Any]) -> None:
    print(
        f"tools/call round trip over stdio, {figures['calls']} interleaved calls per case"
        f" (load {figures['load_before']:.2f} before, {figures['load_after']:.2f} after)"
    )
    print(
        f"{'server':<11} {'case':<14} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'added p50':>10} {'added p99':>10}"
    )
    for server, measured in figures["servers"].items():
        for name, case in measured["cases"].items():
            print(
                f"{server:<11} {name:<14} {case['p50_ms']:8.3f} {case['p99_ms']:8.3f}"
                f" {case['added_p50_ms']:+10.3f} {case['added_p99_ms']:+10.3f}"
            )
    for server, measured in figures["servers"].items():
        cases = measured["cases"]
        if not any(case["large"] for case in cases.values()):
            continue
        print()
        print(f"{server}: large results, median seconds (x direct); peak RSS of the process")
        for name, case in cases.items():
            cells = [
                f"{size} MB {v['seconds']:6.2f} s ({v['vs_direct']:.2f}x)"
                for size, v in case["large"].items()
            ]
            print(f"{name:<14} " + "   ".join(cells) + f"   peak RSS {case['peak_rss_mb']:.0f} MB")
        sdk = measured.get("sdk_client_large")
        if sdk:
            print("through the official Python client (mcp ClientSession): median s")
            for name, by_size in sdk.items():
                cells = [
                    f"{size} MB {sec:6.2f} s ({sec / sdk['direct'][size]:.2f}x)"
                    for size, sec in by_size.items()
                ]
                print(f"{name:<14} " + "   ".join(cells))


if __name__ == "__main__":
    main()
