"""The HTML report, opened in a real headless Chromium: what a person sees is what the JSON says."""

from __future__ import annotations

import json
import re
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
    # A loop whose arguments are long, hold markup and a secret-looking key.
    rows += [
        {"trajectory": "long-args", "step": i, "tool": "write",
         "args": {"path": "<script>alert(1)</script>/" + "x" * 200, "api_key": "sk-hidden"},
         "result": "ok", "error": None}
        for i in range(24)
    ]  # fmt: skip
    loop = folder / "loop.jsonl"
    loop.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "notes.json").write_text('{"not": "a transcript"}')  # skipped
    live = [{"trajectory": "live", "step": i, "tool": "read", "args": {"i": i}, "result": i}
            for i in range(3)]  # fmt: skip
    (folder / "live.jsonl").write_text(  # an agent still writing its last line
        "".join(json.dumps(row) + "\n" for row in live) + '{"trajectory": "live", "to'
    )
    html, out = folder / "report.html", folder / "report.json"
    common = [str(EXAMPLES), str(folder), "--set", "warningThreshold=5"]
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


def test_filter_shows_only_trajectories_with_loops_from_the_start(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    with_loops = [t["id"] for t in doc["trajectories"] if t["events"]]
    quiet = next(t["id"] for t in doc["trajectories"] if not t["events"])
    sections = page.locator("section.traj")
    assert page.locator("#only-loops").is_checked()  # the page opens on the loops
    assert page.locator(f"section.traj[data-id='{quiet}']").is_hidden()
    page.locator("#only-loops").uncheck()
    assert sum(sections.nth(i).is_visible() for i in range(sections.count())) == len(
        doc["trajectories"]
    )
    assert page.locator("#shown").inner_text() == str(len(doc["trajectories"]))
    page.locator("#only-loops").check()
    visible = [
        sections.nth(i).get_attribute("data-id")
        for i in range(sections.count())
        if sections.nth(i).is_visible()
    ]
    assert sorted(visible) == sorted(with_loops)
    assert page.locator(f"section.traj[data-id='{quiet}']").is_hidden()
    assert page.locator("#shown").inner_text() == str(len(with_loops))


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


def test_the_header_says_what_was_analysed_how_and_when(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    about = page.locator("#about")
    assert about.is_visible()
    text = about.inner_text()
    assert str(EXAMPLES) in text  # the inputs as given
    assert "loopwarden analyze " in text and "--set warningThreshold=5" in text  # the command
    assert doc["loopwarden"] in text
    assert "profile openclaw, detectors on; changed: warningThreshold=5" in text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    summary = doc["summary"]
    assert f"{summary['trajectories']} trajectories · {summary['calls']} tool calls" in text


def test_what_was_left_out_is_said_before_the_figures(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    figures = page.locator("#summary").bounding_box()
    for key, selector in (("skipped", "#skipped"), ("warnings", "#warnings")):
        (line,) = doc[key]
        shown = page.locator(selector)
        assert shown.inner_text() == line
        assert shown.bounding_box()["y"] < figures["y"], key


def test_the_looping_call_is_shown_shortened_escaped_and_masked(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    blocked = next(t for t in doc["trajectories"] if t["id"] == "blocked-loop")
    args = page.locator("section.traj[data-id='blocked-loop'] .args")
    call = blocked["first_block"]["call"]
    assert args.inner_text() == f'the repeated call (call {call}): exec {{"command": "make"}}'
    long = page.locator("section.traj[data-id='long-args'] .args code").inner_text()
    assert long.startswith('write {"path": "<script>alert(1)</script>/xxx')  # text, not markup
    assert long.endswith("…") and len(long) == len("write ") + 80
    assert page.locator("section.traj[data-id='long-args'] script").count() == 0
    assert "sk-hidden" not in page.content()  # a secret-looking key's value is masked
    assert not [t for t in doc["trajectories"] if not t["events"] and page.locator(
        f"section.traj[data-id='{t['id']}'] .args").count()]  # fmt: skip


def test_compactions_are_marked_on_the_strip(
    page: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    _, doc = report
    stopped = next(t for t in doc["trajectories"] if t["format"] == "openclaw" and t["stopped"])
    strip = page.locator(f"section.traj[data-id='{stopped['id']}'] .timeline")
    marks = strip.locator("i.cmp")
    assert marks.count() == 1 and "compacted" in marks.get_attribute("title")
    # The compaction falls right before the post-compaction guard's window: the 3 calls it
    # watched end at the stop.
    before = strip.evaluate("el => [...el.children].indexOf(el.querySelector('i.cmp'))")
    assert before == stopped["stop"]["index"] - 2


def test_the_page_fits_a_narrow_window(
    page: Any, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    html, _ = report
    tab = page.context.browser.new_page(viewport={"width": 380, "height": 800})  # a phone
    tab.goto(html.as_uri())
    assert tab.evaluate("document.documentElement.scrollWidth") <= 380  # no sideways page
    for selector in ("#about", "#summary", "#cost", "#by-detector", "#by-tool", "#settings"):
        right = tab.locator(selector).evaluate(
            "el => (el.closest('.scroll') || el).getBoundingClientRect().right"
        )
        assert right <= 380, selector  # a wide table scrolls inside its own box
    assert tab.locator("section.traj.has-loop .why").first.bounding_box()["width"] <= 380
    tab.screenshot(path=str(tmp_path / "narrow.png"), full_page=True)
    tab.close()


def test_sweep_labels_neither_overlap_nor_leave_the_plot(page: Any, tmp_path: Path) -> None:
    html = tmp_path / "sweep.html"
    flat = tmp_path / "loops.jsonl"
    rows = [
        {"trajectory": f"r{n}", "step": i, "tool": "exec", "args": {"n": n}, "result": "same",
         "error": None}
        for n in range(6) for i in range(12 + 3 * n)
    ]  # fmt: skip
    flat.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sweep = ["--sweep", "criticalThreshold=11,12,13,14,15,16,17,18,19,20,25,30"]
    assert main(["analyze", str(flat), *sweep, "--output", "html", "--out", str(html)]) == 1
    tab = page.context.browser.new_page()
    tab.goto(html.as_uri())
    boxes = tab.evaluate(
        "[...document.querySelectorAll('#sweep-plot text.label')].map(t => {"
        " const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; })"
    )
    width, height = (
        float(tab.locator("#sweep-plot").get_attribute(k)) for k in ("width", "height")
    )
    assert len(boxes) >= 3
    for n, (x0, y0, x1, y1) in enumerate(boxes):
        assert x0 >= 0 and x1 <= width and y0 >= 0 and y1 <= height, (n, boxes)
        for other in boxes[n + 1 :]:
            overlap = x0 < other[2] and other[0] < x1 and y0 < other[3] and other[1] < y1
            assert not overlap, (boxes[n], other)
    # No success labels in these transcripts: the caption does not speak of good runs.
    caption = tab.locator("#sweep-caption").inner_text()
    assert "good runs" not in caption and "succeeded blocked" not in caption
    assert "do not say which runs succeeded" in caption
    tab.close()
