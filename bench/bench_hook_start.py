"""Benchmark: wall time of a coding-agent hook process against a bare interpreter start.

Run from the repository root:

    python bench/bench_hook_start.py               # 40 interleaved rounds
    python bench/bench_hook_start.py --rounds 100 --json out/hook_start.json

``loopwarden hook <agent>`` runs once per tool call of Claude Code or Codex: one process reads
one event on stdin, answers and exits. Its goal is a median wall time of at most 3x that of
``python -c pass`` with the same interpreter. Each round runs every case once, in turn
(interleaved, so a noisy moment hits them all alike), after a few warm-up rounds:

1. ``python -c pass``: the floor, what any Python hook pays;
2. ``python -c "import loopwarden"``;
3. ``loopwarden --version`` (the console script next to ``sys.executable``);
4. ``loopwarden hook claude-code``, fed a real ``PreToolUse`` event (captured from Claude Code,
   tests/data/coding_agents) on stdin, with its state file present: ``XDG_STATE_HOME`` points
   to a private temporary directory that the warm-up calls fill. Run both as
   ``python -m loopwarden hook ...`` and through the console script;
5. the same for ``codex``.

Every call gets its own command (``echo step N``) and tool-call id, so the session's history
fills up as in real use without the guard ever seeing a loop (a block answers as fast, but
then the run would stop and measure something else).

The table gives wall time (median, p90, median against ``python -c pass``) and the CPU time
(user + system) of the child processes: on a busy machine the CPU time is the steadier of the
two, since it does not count the time a process waits for a core.

Bytecode: a hook installed from a wheel runs from compiled ``.pyc`` files (pip writes them at
install time). ``PYTHONDONTWRITEBYTECODE=1`` in the environment would make an editable
install recompile every loopwarden module in every hook process, so the children run without
it (the warm-up rounds write the caches) unless ``--no-bytecode-cache`` asks for that case.

While the ``hook`` command is not there (``loopwarden hook --help`` fails), the hook cases are
replaced by a stand-in: the same interpreter importing the modules the hook needs and doing
its work in-process (``LoopGuard`` over an ``SQLiteStore`` in ``XDG_STATE_HOME``, one
``before_tool_call``, the answer printed as JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "tests" / "data" / "coding_agents"

# Used only while `loopwarden hook` does not exist: the work the hook does, in-process.
STAND_IN = """
import json, sys
from loopwarden.guard import LoopGuard
from loopwarden.stores.sqlite import SQLiteStore
from loopwarden.core.config import resolve_config
event = json.load(sys.stdin)
guard = LoopGuard(resolve_config({"profile": "recommended"}), store=SQLiteStore())
run = event.get("prompt_id") or event.get("turn_id")
decision = guard.before_tool_call(
    event["session_id"], event["tool_name"], event["tool_input"], run_id=run,
    tool_call_id=event.get("tool_use_id"),
)
print(json.dumps({"action": decision.action}))
"""


@dataclass
class Case:
    """One command to time; ``agent`` set means it gets a fresh hook event on stdin."""

    name: str
    argv: list[str]
    agent: str | None = None


def _console_script() -> str | None:
    """The ``loopwarden`` script installed with this interpreter (not a PATH shim)."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(folder) / "loopwarden"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which("loopwarden")


def _hook_available(env: dict[str, str]) -> bool:
    probe = [sys.executable, "-m", "loopwarden", "hook", "--help"]
    return subprocess.run(probe, env=env, capture_output=True, check=False).returncode == 0


def _event(agent: str, n: int) -> bytes:
    """The captured PreToolUse event of ``agent``, made the ``n``-th distinct call."""
    event = json.loads((EVENTS / agent / "hook-events" / "PreToolUse.json").read_text())
    event["tool_input"] = {**event["tool_input"], "command": f"echo step {n}"}
    event["tool_use_id"] = f"bench_{n:06d}"
    return json.dumps(event).encode()


def _cases(script: str | None, hook: bool) -> list[Case]:
    py = sys.executable
    cases = [
        Case("python -c pass", [py, "-c", "pass"]),
        Case("python -c 'import loopwarden'", [py, "-c", "import loopwarden"]),
    ]
    if script:
        cases.append(Case("loopwarden --version (script)", [script, "--version"]))
    cases.append(Case("python -m loopwarden --version", [py, "-m", "loopwarden", "--version"]))
    for agent in ("claude-code", "codex"):
        if hook:
            module = [py, "-m", "loopwarden", "hook", agent]
            cases.append(Case(f"hook {agent} (python -m)", module, agent))
            if script:
                cases.append(Case(f"hook {agent} (script)", [script, "hook", agent], agent))
        else:
            cases.append(Case(f"stand-in hook {agent} (python -c)", [py, "-c", STAND_IN], agent))
    return cases


def _run_once(case: Case, env: dict[str, str], n: int) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``case``."""
    stdin = _event(case.agent, n) if case.agent else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(case.argv, input=stdin, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # A hook that fails open still exits 0, with one line on stderr: that is not what we time.
    if done.returncode != 0 or (case.agent and done.stderr.strip()):
        sys.exit(
            f"{case.name}: exit {done.returncode}\nstdout: {done.stdout.decode()[:500]}\n"
            f"stderr: {done.stderr.decode()[:2000]}"
        )
    return elapsed, cpu


def _measure(
    cases: list[Case], env: dict[str, str], rounds: int, warmup: int
) -> list[list[tuple[float, float]]]:
    samples: list[list[tuple[float, float]]] = [[] for _ in cases]
    n = 0
    for round_no in range(warmup + rounds):
        for i, case in enumerate(cases):
            n += 1
            measured = _run_once(case, env, n)
            if round_no >= warmup:
                samples[i].append(measured)
    return samples


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _report(cases: list[Case], samples: list[list[tuple[float, float]]]) -> list[dict[str, object]]:
    wall_floor = statistics.median(wall for wall, _ in samples[0])
    cpu_floor = statistics.median(cpu for _, cpu in samples[0])
    rows = []
    print(
        f"{'case':36} {'median ms':>9} {'p90 ms':>7} {'x pass':>7} {'cpu ms':>7} {'cpu x pass':>10}"
    )
    for case, measured in zip(cases, samples, strict=True):
        walls = [wall for wall, _ in measured]
        cpu = statistics.median(c for _, c in measured)
        median = statistics.median(walls)
        row = {
            "case": case.name,
            "median_ms": round(median * 1000, 2),
            "p90_ms": round(_p90(walls) * 1000, 2),
            "ratio_to_pass": round(median / wall_floor, 2),
            "cpu_median_ms": round(cpu * 1000, 2),
            "cpu_ratio_to_pass": round(cpu / cpu_floor, 2) if cpu_floor else None,
        }
        rows.append(row)
        cpu_ratio = f"{cpu / cpu_floor:9.2f}x" if cpu_floor else f"{'n/a':>10}"
        print(
            f"{case.name:36} {median * 1000:9.1f} {_p90(walls) * 1000:7.1f} "
            f"{median / wall_floor:6.2f}x {cpu * 1000:7.1f} {cpu_ratio}"
        )
    return rows


def main() -> None:
    """Run the benchmark and print the table (optionally write it as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="measured rounds (default 40)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up rounds (default 5)")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (recompiling on every start)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lw-hook-bench-") as state:
        env = dict(os.environ, XDG_STATE_HOME=state)
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        script = _console_script()
        hook = _hook_available(env)
        cases = _cases(script, hook)
        from loopwarden.cli import engine_build  # this process only: not timed

        print(f"python {sys.version.split()[0]} at {sys.executable}")
        print(f"loopwarden: {engine_build()}; console script: {script or 'not found'}")
        cache = "off (PYTHONDONTWRITEBYTECODE)" if env.get("PYTHONDONTWRITEBYTECODE") else "on"
        print(f"bytecode cache: {cache}; {args.rounds} rounds after {args.warmup} warm-up")
        if not hook:
            print("`loopwarden hook` not available: the hook cases are the in-process stand-in")
        samples = _measure(cases, env, args.rounds, args.warmup)
        state_files = sorted(str(p.relative_to(state)) for p in Path(state).rglob("*.db"))
        print(f"state files: {', '.join(state_files) or 'none'}")
        rows = _report(cases, samples)
    if args.json:
        out = {"python": sys.version, "build": engine_build(), "rounds": args.rounds, "rows": rows}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
