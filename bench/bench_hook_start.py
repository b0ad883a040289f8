"""Benchmark: wall time of a coding-agent hook process against a bare interpreter start.

Run from the repository root:

    python bench/bench_hook_start.py --clean-venv    # build the wheel, install it in a new venv
    python bench/bench_hook_start.py --python VENV/bin/python --rounds 60
    python bench/bench_hook_start.py                 # this interpreter (an editable install)

``loopwarden hook <agent>`` runs twice per tool call of Claude Code, Codex or Gemini CLI: one
process reads one event on stdin, answers and exits. Its goal is a median wall time of at most
2x that of ``python -c pass`` with the same interpreter, on every event, measured as a user
runs it: ``--clean-venv`` builds the regular (compiled) wheel of this checkout and installs it
alone in a new virtual environment, and the hook is run through the command
``hooks install`` writes (``python -m loopwarden hook AGENT``). Each round runs every case
once, in turn (interleaved, so a noisy moment hits them all alike), after a few warm-up rounds:

1. ``python -c pass``: the floor, what any Python hook pays;
2. ``python -c "import loopwarden"``;
3. ``loopwarden hook claude-code``, fed a real ``PreToolUse`` event (captured from Claude Code,
   tests/data/coding_agents) on stdin, then its ``PostToolUse``; and the ``codex`` ones. These
   go through the user's resident hook server (started by the first warm-up event, as in real
   use) with ``XDG_STATE_HOME`` pointing to a private temporary folder;
4. the same ``PreToolUse`` through the console script (``hooks install`` writes that command
   when it is itself run as ``loopwarden``), when the venv has one;
5. the same ``PreToolUse`` with ``LOOPWARDEN_HOOK_SERVER=0``: the hook working alone, as it
   does for the first event or when the server cannot be reached.

Every call gets its own command (``echo step N``) and tool-call id, so the session's history
fills up as in real use without the guard ever seeing a loop (a block answers as fast, but
then the run would stop and measure something else).

The table gives wall time (median, p90, median against ``python -c pass``) and the CPU time
(user + system) of the child processes: on a busy machine the CPU time is the steadier of the
two, since it does not count the time a process waits for a core. The CPU time of the hook
server is not the children's: it is reported on its own line.

Bytecode: a hook installed from a wheel runs from compiled ``.pyc`` files (pip writes them at
install time). ``PYTHONDONTWRITEBYTECODE=1`` in the environment would make an editable
install recompile every loopwarden module in every hook process, so the children run without
it (the warm-up rounds write the caches) unless ``--no-bytecode-cache`` asks for that case.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "tests" / "data" / "coding_agents"


@dataclass
class Case:
    """One command to time; ``agent`` set means it gets a fresh hook event on stdin."""

    name: str
    argv: list[str]
    agent: str | None = None
    event: str = "PreToolUse"
    env: dict[str, str] = field(default_factory=dict)


def _event(agent: str, name: str, n: int) -> bytes:
    """The captured ``name`` event of ``agent``, made the ``n``-th distinct call."""
    event = json.loads((EVENTS / agent / "hook-events" / f"{name}.json").read_text())
    event["tool_input"] = {**event["tool_input"], "command": f"echo step {n}"}
    event["tool_use_id"] = f"bench_{n:06d}"
    return json.dumps(event).encode()


def _cases(py: str) -> list[Case]:
    cases = [
        Case("python -c pass", [py, "-c", "pass"]),
        Case("python -c 'import loopwarden'", [py, "-c", "import loopwarden"]),
    ]
    for agent in ("claude-code", "codex"):
        hook = [py, "-m", "loopwarden", "hook", agent]
        for event in ("PreToolUse", "PostToolUse"):
            cases.append(Case(f"hook {agent} {event}", hook, agent, event))
    script = Path(py).parent / "loopwarden"  # the console script pip made next to python
    if script.is_file():
        argv = [str(script), "hook", "claude-code"]
        cases.append(Case("hook claude-code PreToolUse (script)", argv, "claude-code"))
    alone = {"LOOPWARDEN_HOOK_SERVER": "0"}
    cases.append(
        Case("hook claude-code PreToolUse, alone", cases[2].argv, "claude-code", env=alone)
    )
    return cases


def _clean_venv(folder: Path) -> str:
    """Build the regular wheel of this checkout and install it alone in a new venv."""
    wheels = folder / "wheels"
    print("building the wheel (compiles the engine with mypyc: a few minutes) ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(wheels)],
        check=True,
    )
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    (wheel,) = wheels.glob("loopwarden-*.whl")
    subprocess.run([py, "-m", "pip", "install", "-q", str(wheel)], check=True)
    return py


def _run_once(case: Case, env: dict[str, str], n: int) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``case``."""
    stdin = _event(case.agent, case.event, n) if case.agent else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        case.argv, input=stdin, env={**env, **case.env}, capture_output=True, check=False
    )
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
            n += 1 if case.event == "PreToolUse" else 0  # a PostToolUse is its call's outcome
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


def _server_cpu(state: str) -> str:
    """The CPU time the resident hook server used so far (Linux /proc), for the report."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes()
            if b"loopwarden.hooks._server" in cmdline and state.encode() in cmdline:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                ticks = int(fields[11]) + int(fields[12])  # utime, stime
                return f"{ticks / os.sysconf('SC_CLK_TCK') * 1000:.0f} ms (pid {proc.name})"
        except (OSError, ValueError, IndexError):
            continue
    return "no server found"


def main() -> None:
    """Run the benchmark and print the table (optionally write it as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="measured rounds (default 40)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up rounds (default 5)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PY", help="time loopwarden installed for PY")
    where.add_argument(
        "--clean-venv",
        action="store_true",
        help="build this checkout's wheel and install it alone in a new venv (the goal's setup)",
    )
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (recompiling on every start)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lw-hook-bench-") as temp:
        state = str(Path(temp) / "state")
        py = _clean_venv(Path(temp)) if args.clean_venv else (args.python or sys.executable)
        env = dict(os.environ, XDG_STATE_HOME=state, LOOPWARDEN_HOOK_IDLE="30")
        if args.clean_venv or args.python:
            env.pop("PYTHONPATH", None)  # the venv's own loopwarden, nothing else
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        cases = _cases(py)
        build = subprocess.run(
            [py, "-m", "loopwarden", "--version"], env=env, capture_output=True, text=True
        ).stdout.strip()
        print(f"python at {py}: {build}")
        cache = "off (PYTHONDONTWRITEBYTECODE)" if env.get("PYTHONDONTWRITEBYTECODE") else "on"
        print(f"bytecode cache: {cache}; {args.rounds} rounds after {args.warmup} warm-up")
        samples = _measure(cases, env, args.rounds, args.warmup)
        print(f"hook server CPU time: {_server_cpu(state)}")
        rows = _report(cases, samples)
        goal = max(rows[i]["ratio_to_pass"] for i in range(2, len(rows) - 1))
        print(f"slowest event through the server: {goal}x python -c pass (goal: <= 2x)")
    if args.json:
        out = {"python": py, "build": build, "rounds": args.rounds, "rows": rows}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
