"""Config file parsing: ``load_config`` on JSON and JSON5 files of real and absurd sizes.

Run from the repository root: ``python -m bench.bench_config``. "reference json5" is what
``load_config`` did for every file that is not plain JSON before the JSON5-to-JSON rewrite
(``loopwarden._json5``); the other columns are ``load_config`` now (read, parse, validate).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import json5

from loopwarden.core.config import MAX_CONFIG_BYTES, ConfigError, load_config


def _json5_config(agents: int) -> str:
    """A config written by hand: comments, unquoted keys, single quotes, trailing commas."""
    parts = ["// gateway config\n{\n  tools: { loopDetection: { enabled: true, }, },\n"]
    parts.append("  agents: { list: [\n")
    for i in range(agents):
        parts.append(
            f"    {{ id: 'agent-{i}', /* team {i % 7} */ tools: {{ loopDetection: {{ "
            f"historySize: {20 + i % 9}, toolPolicies: {{ poll_{i}: {{ poll: true, }}, }}, "
            "}, }, },\n"
        )
    parts.append("  ], },\n}\n")
    return "".join(parts)


def _best_of(runs: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Print parse times per file size and format."""
    # No options: the parser gives ``--help`` and refuses stray arguments instead of ignoring them.
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lw-bench-config-"))
    print(f"{'file':<28}{'bytes':>10}{'reference json5':>18}{'load_config':>14}")
    for agents in (10, 200, 2000):
        text = _json5_config(agents)
        for kind, body in (("json5", text), ("json", json.dumps(json5.loads(text)))):
            path = folder / f"{agents}.{kind}"
            path.write_text(body)
            slow = _best_of(1 if agents >= 2000 else 3, lambda b=body: json5.loads(b))
            fast = _best_of(5, lambda p=path: load_config(p))
            name = f"{agents} agents, {kind}"
            print(f"{name:<28}{len(body):>10,}{slow * 1000:>15.1f} ms{fast * 1000:>11.2f} ms")
    huge = folder / "huge.json5"
    huge.write_text(_json5_config(2000) * 20)
    start = time.perf_counter()
    try:
        load_config(huge)
    except ConfigError as exc:
        took = (time.perf_counter() - start) * 1000
        size = huge.stat().st_size
        print(f"\n{size:,} bytes (limit {MAX_CONFIG_BYTES:,}): refused in {took:.2f} ms")
        print(f"  {exc}")


if __name__ == "__main__":
    main()
