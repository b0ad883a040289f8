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
SUMMARY_KEYS = ("trajectories", "calls", "with_warning", "with_block_or_stop", "stopped",
                "calls_after_first_block_or_stop", "calls_saved")  # fmt: skip


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
            for index in range(traj["stop"]["index"] + 1, traj["calls"]):
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
    why = page.locator("section.traj[data-id='blocked-loop'] .why[data-action='block']")
    assert why.inner_text().startswith(f"blocked at call {first['call']} (exec, generic_repeat")


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
    assert sorted(visible) == sorted(with_loops)
    assert page.locator(f"section.traj[data-id='{quiet}']").is_hidden()
    assert page.locator("#shown").inner_text() == str(len(with_loops))
    page.locator("#only-loops").uncheck()
    assert page.locator(f"section.traj[data-id='{quiet}']").is_visible()


def test_loops_come_first_stopped_then_blocked_then_warned(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    by_id = {t["id"]: t for t in doc["trajectories"]}
    sections = page.locator("section.traj")
    order = [sections.nth(i).get_attribute("data-id") for i in range(sections.count())]

    def rank(traj: dict[str, Any]) -> int:
        return 0 if traj["stopped"] else 1 if traj["blocks"] else 2 if traj["events"] else 3

    ranks = [rank(by_id[i]) for i in order]
    assert ranks == sorted(ranks) and ranks[0] == 0 and 1 in ranks and 3 in ranks


def test_every_reason_is_readable_on_a_screenshot_and_a_printout(
    page: Any, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, doc = report
    for media in ("screen", "print"):
        page.emulate_media(media=media)
        shot = tmp_path / f"{media}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        for traj in doc["trajectories"]:
            wanted = {"warn": traj["first_warning"], "block": traj["first_block"]}
            wanted["stop"] = traj["stop"]
            for action, where in wanted.items():
                line = page.locator(f"section.traj[data-id='{traj['id']}'] .why")
                line = line.and_(page.locator(f"[data-action='{action}']"))
                if where is None:
                    assert line.count() == 0
                    continue
                assert line.is_visible(), (media, traj["id"], action)
                text = line.inner_text()
                assert f"at call {where['call']} " in text
                if action != "warn":
                    assert where["message"] in text
                # Nothing covers it: the element itself is what is drawn at its centre.
                line.scroll_into_view_if_needed()
                box = line.bounding_box()
                assert box is not None and box["width"] > 100 and box["height"] >= 10
                hit = page.evaluate(
                    "([x, y]) => { const e = document.elementFromPoint(x, y);"
                    " return e !== null && e.closest('.why') !== null; }",
                    [box["x"] + 20, box["y"] + box["height"] / 2],
                )
                assert hit, (media, traj["id"], action)
    page.emulate_media(media="screen")


def test_breakdowns_per_detector_and_tool_match_the_events(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    actions = ("warn", "block", "stop")
    detectors: dict[str, list[int]] = {}
    tools: dict[str, list[int]] = {}
    for traj in doc["trajectories"]:
        for event in traj["events"]:
            column = actions.index(event["action"])
            detectors.setdefault(event["detector"], [0, 0, 0])[column] += 1
            tools.setdefault(event["tool"], [0, 0, 0])[column] += 1
    rows = page.locator("#by-detector tr")
    shown = {}
    for i in range(1, rows.count()):
        cells = rows.nth(i).locator("td").all_inner_texts()
        shown[cells[0]] = [int(c) for c in cells[2:5]]
    assert shown == detectors
    rows = page.locator("#by-tool tr")
    saved = 0
    for i in range(1, rows.count()):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert [int(c) for c in cells[2:5]] == tools.get(cells[0], [0, 0, 0])
        saved += int(cells[5])
    assert saved == doc["summary"]["calls_saved"]


def test_the_cost_and_the_settings_that_ran(page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    _, doc = report
    cost = doc["summary"]["cost"]
    calls = page.locator("#cost [data-key='calls_saved'] dd").inner_text()
    assert calls == f"{doc['summary']['calls_saved']:,}"
    tokens = page.locator("#cost [data-key='tokens_saved'] dd").inner_text()
    assert tokens == f"{cost['tokens_saved'] or 0:,} of {cost['tokens']:,}"
    assert cost["tokens"] > 0  # the OpenClaw example records its tokens
    row = page.locator("#settings tr[data-key='warningThreshold']")
    assert row.locator("td").all_inner_texts()[1:] == [str(doc["config"]["warningThreshold"]), "10"]
    assert "changed" in (row.get_attribute("class") or "")  # --set warningThreshold=5
    same = page.locator("#settings tr[data-key='historySize']")
    assert "changed" not in (same.get_attribute("class") or "")


def test_a_sweep_page_plots_each_setting(page: Any, tmp_path: Path) -> None:
    html, data = tmp_path / "sweep.html", tmp_path / "sweep.json"
    sweep = ["--sweep", "criticalThreshold=12,16,20", "--sweep", "warningThreshold=5,10"]
    assert main(["analyze", str(EXAMPLES), *sweep, "--output", "html", "--out", str(html)]) == 1
    assert main(["analyze", str(EXAMPLES), *sweep, "--output", "json", "--out", str(data)]) == 1
    rows = json.loads(data.read_text())["sweep"]
    tab = page.context.browser.new_page()  # the module's browser: one Playwright per thread
    tab.goto(html.as_uri())
    assert tab.locator("#sweep tr").count() == len(rows) + 1
    points = tab.locator("#sweep-plot g.point")
    plotted = sum(int(points.nth(i).get_attribute("data-count")) for i in range(points.count()))
    assert plotted == len(rows) == 6
    # One point per distinct (blocked, saved): settings with the same outcome share it.
    distinct = {(r["summary"]["with_block_or_stop"], r["summary"]["calls_saved"]) for r in rows}
    assert points.count() == len(distinct)
    assert tab.locator("#sweep-plot").is_visible()
    tab.close()
