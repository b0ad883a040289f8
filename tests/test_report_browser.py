"""The HTML report, opened in a real headless Chromium: what a person sees is what the JSON says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import main

from _support import require_binary, require_module

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SUMMARY_KEYS = ("trajectories", "calls", "with_warning", "with_block", "stopped",
                "calls_after_first_block")  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The examples plus a blocked loop, as an HTML page and as the JSON it must agree with."""
    folder = tmp_path_factory.mktemp("report")
    rows = [
        {"trajectory": "blocked-loop", "step": i, "tool": "exec", "args": {"command": "make"},
         "result": "1 failing", "error": None}
        for i in range(24)
    ]  # fmt: skip
    loop = folder / "loop.jsonl"
    loop.write_text("".join(json.dumps(row) + "\n" for row in rows))
    html, out = folder / "report.html", folder / "report.json"
    common = [str(EXAMPLES), str(loop), "--set", "warningThreshold=5"]
    assert main(["analyze", *common, "--output", "html", "--out", str(html)]) == 1
    assert main(["analyze", *common, "--output", "json", "--out", str(out)]) == 1
    return html, json.loads(out.read_text())


@pytest.fixture(scope="module")
def page(report: tuple[Path, dict[str, Any]]) -> Any:
    require_binary("chromium", "apt-get install chromium (Debian's package)")
    sync_api = require_module("playwright.sync_api", "test")
    html, _ = report
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        tab = browser.new_page()
        tab.on("request", lambda request: requests.append(request.url))
        tab.goto(html.as_uri())
        tab.requests = requests
        yield tab
        browser.close()


def _color(locator: Any) -> str:
    return str(locator.evaluate("el => getComputedStyle(el).backgroundColor"))


def test_page_is_self_contained(page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    html, _ = report
    assert page.requests == [html.as_uri()]  # no stylesheet, script or font fetched
    text = html.read_text()
    assert "<link" not in text and " src=" not in text


def test_summary_counts_match_the_json(page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    _, doc = report
    for key in SUMMARY_KEYS:
        shown = page.locator(f"#summary [data-key='{key}'] dd").inner_text()
        assert shown == str(doc["summary"][key]), key
    assert page.locator("section.traj").count() == len(doc["trajectories"])


def test_cells_are_coloured_by_verdict(page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    _, doc = report
    palette: dict[str, set[str]] = {}
    for traj in doc["trajectories"]:
        cells = page.locator(f"section.traj[data-id='{traj['id']}'] .timeline span")
        assert cells.count() == traj["calls"]
        if not traj["events"]:  # no verdict at all: every call is ok
            for index in range(0, traj["calls"], 3):
                palette.setdefault("ok", set()).add(_color(cells.nth(index)))
            continue
        for event in traj["events"]:
            palette.setdefault(event["action"], set()).add(_color(cells.nth(event["index"])))
        if traj["stopped"]:  # calls after the stop would not have run
            for index in range(traj["first_block"]["index"] + 1, traj["calls"]):
                palette.setdefault("notrun", set()).add(_color(cells.nth(index)))
    assert {"ok", "warn", "block", "stop"} <= set(palette)
    assert all(len(found) == 1 for found in palette.values()), palette  # one colour per verdict
    colours = [next(iter(found)) for found in palette.values()]
    assert len(set(colours)) == len(colours)  # and the verdicts look different
    assert "rgba(0, 0, 0, 0)" not in colours


def test_hover_text_names_tool_detector_and_message(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    blocked = next(t for t in doc["trajectories"] if t["id"] == "blocked-loop")
    first = blocked["first_block"]
    cell = page.locator("section.traj[data-id='blocked-loop'] .timeline span").nth(first["index"])
    cell.hover()
    title = cell.get_attribute("title")
    assert f"call {first['index'] + 1}: exec" in title
    assert "blocked" in title and f"generic_repeat ×{first['count']}" in title
    assert first["message"] in title
    why = page.locator("section.traj[data-id='blocked-loop'] .why").inner_text()
    assert why.startswith(f"blocked at call {first['index'] + 1} (exec, generic_repeat")


def test_filter_shows_only_trajectories_with_loops(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    with_loops = [t["id"] for t in doc["trajectories"] if t["events"]]
    quiet = next(t["id"] for t in doc["trajectories"] if not t["events"])
    sections = page.locator("section.traj")
    assert sum(sections.nth(i).is_visible() for i in range(sections.count())) == len(
        doc["trajectories"]
    )
    page.locator("#only-loops").check()
    visible = [
        sections.nth(i).get_attribute("data-id")
        for i in range(sections.count())
        if sections.nth(i).is_visible()
    ]
    assert visible == with_loops
    assert page.locator(f"section.traj[data-id='{quiet}']").is_hidden()
    assert page.locator("#shown").inner_text() == str(len(with_loops))
    page.locator("#only-loops").uncheck()
    assert page.locator(f"section.traj[data-id='{quiet}']").is_visible()
