"""Benchmark ``loopwarden analyze`` on a decompression bomb: a small ``.jsonl.gz`` whose one line
expands to ``--mb`` MB. Prints the file sizes, the peak RSS and time of the analyze process, and
its first error line. With the line limit (64 Mi characters) the peak stays near the limit
whatever ``--mb`` is; without it, the whole line (and its copies) was held in memory.

    python bench/bench_transcript_line.py            # a 400 KB file, one 400 MB line
    python bench/bench_transcript_line.py --mb 1000
"""

from __future__ import annotations

import argparse
import gzip
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_bomb(path: Path, megabytes: int) -> None:
    """One flat-JSONL line whose ``args`` hold ``megabytes`` MB of the same letter."""
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b'{"trajectory": "t", "tool": "exec", "args": {"x": "')
        chunk = b"a" * (1 << 20)
        for _ in range(megabytes):
            handle.write(chunk)
        handle.write(b'"}}\n')


def main() -> None:
    """Write the bomb, analyze it in a child process, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=int, default=400, help="expanded size of the line, MB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        bomb = Path(folder) / "bomb.jsonl.gz"
        write_bomb(bomb, args.mb)
        compressed_kb = bomb.stat().st_size / 1024
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "loopwarden", "analyze", str(bomb)],
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KB on Linux
    print(f"file {bomb.name}: {compressed_kb:.0f} KB compressed, {args.mb} MB expanded")
    print(f"analyze: exit {done.returncode}, peak RSS {peak_mb:.0f} MB, {elapsed:.2f} s")
    first = (done.stderr.strip().splitlines() or ["(no error)"])[0]
    print(f"stderr: {first[:160]}")


if __name__ == "__main__":
    main()
