"""Regenerate rollouts/two-turns-rollout-*.jsonl (real Codex, fake model server): two turns.

    python tests/data/coding_agents/codex/capture_turns.py

``codex exec`` runs a failing command three times and answers; ``codex exec resume`` then
continues the same session with a second prompt, in which the model runs the same command twice
more and another one once. Codex appends the second turn to the same rollout file; it is copied
unchanged (renamed with a ``two-turns-`` prefix) for the importer tests, which check that the
two turns are two runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "tests" / "coding_agents"))

from _clis import BIN, codex_argv, codex_config, codex_env  # noqa: E402
from fake_openai import FakeOpenAI, RepeatCommand  # noqa: E402

LOOP = "ls missing_dir"


def run_codex(root: Path, model: RepeatCommand, args: list[str]) -> None:
    """One ``codex exec`` in root/work with CODEX_HOME=root/home against a fresh fake server."""
    home, work = root / "home", root / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    with FakeOpenAI(model) as server:
        (home / "config.toml").write_text(codex_config(server.base_url))
        argv = codex_argv(BIN / "codex", *args)
        env = codex_env(root, home)
        subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, check=True,
                       capture_output=True, timeout=120)  # fmt: skip


def main() -> None:
    """Run the two turns and copy the rollout."""
    with tempfile.TemporaryDirectory(prefix="codex-turns-") as tmp:
        root = Path(tmp)
        run_codex(root, RepeatCommand([LOOP] * 3, final_text="It is missing."), ["list it"])
        (rollout,) = (root / "home" / "sessions").rglob("rollout-*.jsonl")
        session = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
        second = RepeatCommand([LOOP] * 5 + ["pwd"], final_text="Still missing.")
        run_codex(root, second, ["resume", session, "try again"])
        for old in HERE.glob("rollouts/two-turns-*.jsonl"):
            old.unlink()
        shutil.copy(rollout, HERE / "rollouts" / f"two-turns-{rollout.name}")
        print(rollout.name)


if __name__ == "__main__":
    main()
