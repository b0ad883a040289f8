"""Development scenarios for telling a stuck agent from healthy bulk work (Detection v4).

Three kinds of runs, generated deterministically from a seed, each a list of `ToolCall`s in
the neutral transcript shape (`loopwarden.transcripts.model`), so that they replay through the
real analyzer exactly as a recorded transcript would:

- **bulk** (healthy): 10 to 40 distinct calls to one tool, every one answered by the same
  constant acknowledgement ("Email sent.", `{"status": "ok"}`, "204 No Content", `true`, an
  MCP text item, pytest's "1 passed in 0.01s", an editor's "Successfully modified file" from a
  tool that is not on the built-in editor list …). Never to be blocked or stopped.
- **stuck**: 10 distinct calls that fail the same way, the failure text quoting the argument
  that varies (in words or in numbers): a Python SyntaxError quoting the source line and its
  caret, `sed: can't read X`, `ls: cannot access 'X'`, an editor's old_str not found, an HTTP
  401/404 body naming the path, `FileNotFoundError: … 'data/X.csv'`, `User 'bob' not found` ….
  To be blocked by the 5th call of the stretch and stopped by the 8th.
- **survey** (healthy): distinct items checked one after the other, each answered "queued" or
  "not found" (never more than 3 not-found in a row). Never to be blocked.

A failure is marked the way transcripts mark one: mini-swe-agent's `<returncode>N</returncode>`
around the output (alone, or with the flat JSONL format's `error: "returncode=N"` label), an
`error` text as the outcome, an MCP result with `isError: true`, or a result with an error
label beside it. Each scenario may start with a few healthy calls of other tools; `start` is
the index of the scenario's first bulk, stuck or survey call.

Each shape draws its tool name, its phrasing and its varied arguments from pools, so that the
scenarios cover shapes rather than a handful of examples.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopwarden.transcripts.model import ToolCall

BULK = "bulk"
STUCK = "stuck"
SURVEY = "survey"

STUCK_CALLS = 10  # each stuck scenario's stretch of failing calls


@dataclass(frozen=True)
class Scenario:
    """One development run: its kind, its shape, and its calls (from `start` on, the shape)."""

    kind: str  # BULK, STUCK or SURVEY
    shape: str  # what the run looks like, for tables and test ids
    name: str  # unique among the scenarios
    calls: list[ToolCall]
    start: int = 0  # index of the first call of the shape (the calls before are a prefix)


# ---------------------------------------------------------------------------------------------
# Word pools for the arguments that vary (mostly words: masking digits is not enough)


def _words(text: str) -> list[str]:
    return text.split()


_NOUNS = _words(
    "invoice order customer report config settings user session payload record metric event "
    "account profile ticket batch queue widget schema index cache token export summary backup "
    "draft release budget client vendor parser handler helper loader model view router "
    "middleware fixture migration pipeline worker scheduler"
)
_ADJECTIVES = _words(
    "monthly final old new raw clean daily legacy tmp main shared local remote test prod "
    "base core extra default"
)
_PEOPLE = _words(
    "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert "
    "sybil trent victor walter yuki zara omar priya lena"
)
_CITIES = _words(
    "Springfeld Nowhereville Atlantys Zurik Lisbonne Kyotoo Gotham Metropolis Rivendell "
    "Shelbyville Londn Parris Berln Madrd Tokio Sidney Amsterdamm Brusels"
)
_DIRS = ["src", "lib", "app", "data", "tests", "scripts", "docs", "config", "pkg/core", "api/v1"]
_DOMAINS = ["example.com", "acme.io", "corp.example", "mail.test", "team.dev"]
_LABELS = _words("bug enhancement docs triage wontfix duplicate security perf ux backend frontend")


def _word(rng: random.Random) -> str:
    return rng.choice(_NOUNS)


def _snake(rng: random.Random, words: int | None = None) -> str:
    count = words if words is not None else rng.randint(1, 3)
    pool = _ADJECTIVES if count > 1 else _NOUNS
    parts = [rng.choice(pool) for _ in range(count - 1)] + [rng.choice(_NOUNS)]
    return "_".join(parts)


def _distinct(rng: random.Random, make: Callable[[random.Random], str], count: int) -> list[str]:
    """`count` different values of `make` (it must be able to make that many)."""
    seen: dict[str, None] = {}
    for _ in range(count * 200):
        seen.setdefault(make(rng), None)
        if len(seen) == count:
            return list(seen)
    raise ValueError(f"could not make {count} distinct values")


def _varied(rng: random.Random, count: int, words: Callable[[random.Random], str]) -> list[str]:
    """The varied argument of a stuck stretch: in words, in numbers, or both (a third each)."""
    mode = rng.choice(("words", "numbers", "both"))
    if mode == "words":
        return _distinct(rng, words, count)
    base = words(rng)
    if mode == "numbers":
        return [f"{base}{n}" for n in rng.sample(range(1, 500), count)]
    return _distinct(rng, lambda r: f"{words(r)}{r.randint(1, 99)}", count)


def _path(rng: random.Random, name: str, ext: str | None = None) -> str:
    suffix = ext if ext is not None else rng.choice((".py", ".txt", ".json", ".yaml", ".md"))
    return f"{rng.choice(_DIRS)}/{name}{suffix}"


# ---------------------------------------------------------------------------------------------
# How transcripts carry an outcome


def _mini(returncode: int, output: str) -> str:
    """A mini-swe-agent observation."""
    return f"<returncode>{returncode}</returncode>\n<output>\n{output}\n</output>"


def _mcp(text: str, is_error: bool | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error is not None:
        result["isError"] = is_error
    return result


# One run's transcript marks every failure the same way: each scenario picks its way once.
def _shell_style(rng: random.Random) -> str:
    return rng.choice(("mini", "flat", "error"))


def _tool_style(rng: random.Random) -> str:
    return rng.choice(("error", "mcp", "labelled"))


def _shell_failure(style: str, command: str, returncode: int, output: str) -> ToolCall:
    """A failed shell command, marked the way `style` says (see `_shell_style`)."""
    params = {"command": command}
    if style == "mini":  # the observation alone says it failed
        return ToolCall("bash", params, result=_mini(returncode, output))
    if style == "flat":  # loopwarden's flat JSONL: the observation plus a short label
        return ToolCall(
            "bash", params, result=_mini(returncode, output), error=f"returncode={returncode}"
        )
    return ToolCall("bash", params, error=output)  # the runtime's error text is the outcome


def _tool_failure(style: str, tool: str, params: Any, text: str) -> ToolCall:
    """A failed call of a tool that is not a shell, marked the way `style` says."""
    if style == "error":  # a raised exception or an error text: the error is the outcome
        return ToolCall(tool, params, error=text)
    if style == "mcp":
        return ToolCall(tool, params, result=_mcp(text, True))
    # A result with the error beside it (tau-bench in the flat JSONL format: the output again).
    return ToolCall(tool, params, result=text, error=text)


# ---------------------------------------------------------------------------------------------
# Healthy prefixes: a few calls of other tools before the shape starts


def _prefix(rng: random.Random) -> list[ToolCall]:
    options = [
        ToolCall("read_file", {"path": "README.md"}, result="# Project\n\nSetup notes."),
        ToolCall("list_dir", {"path": "."}, result="README.md\nsrc\ntests\npyproject.toml"),
        ToolCall(
            "search", {"query": "quarterly plan"}, result="3 results: plan.md, q3.md, notes.md"
        ),
        ToolCall("get_time", {}, result="2026-12-05T09:12:44Z"),
        ToolCall("bash", {"command": "git status --short"}, result=_mini(0, " M src/app.py")),
    ]
    return rng.sample(options, rng.randint(0, 3))


# ---------------------------------------------------------------------------------------------
# Healthy bulk work: distinct calls, one constant acknowledgement


def _email(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("send_email", "email_send", "gmail_send_message", "send_mail"))
    ack = rng.choice(("Email sent.", "Message sent successfully.", "Sent.", "OK"))
    people = _distinct(rng, lambda r: f"{r.choice(_PEOPLE)}.{_word(r)}", n)
    return [
        ToolCall(
            tool,
            {
                "to": f"{p}@{rng.choice(_DOMAINS)}",
                "subject": f"Your {rng.choice(_NOUNS)} is ready",
                "body": f"Hello {p.split('.')[0].title()}, please find the {_snake(rng)} attached.",
            },
            result=ack,
        )
        for p in people
    ]


def _ticket(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("create_ticket", "jira_create_issue", "open_ticket", "linear_create_issue"))
    ack = rng.choice(("Ticket created.", "Issue created.", "Created."))
    titles = _distinct(rng, lambda r: f"{_snake(r, 2).replace('_', ' ')} fails on {_word(r)}", n)
    return [
        ToolCall(tool, {"title": t, "priority": rng.choice(("low", "medium"))}, result=_mcp(ack))
        for t in titles
    ]


def _label(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("label_issue", "add_label", "github_add_labels", "tag_item"))
    ack = rng.choice(("Label added.", "Labels updated.", "Tagged."))
    numbers = rng.sample(range(100, 9000), n)
    return [
        ToolCall(tool, {"issue": k, "labels": [rng.choice(_LABELS)]}, result=_mcp(ack, False))
        for k in numbers
    ]


def _insert_row(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("insert_row", "db_insert", "sheets_append_row", "add_record"))
    ack: Any = rng.choice(({"status": "ok"}, {"ok": True}, {"success": True}, "Row inserted."))
    rows = _distinct(rng, lambda r: f"{r.choice(_PEOPLE)}-{_word(r)}", n)
    return [
        ToolCall(tool, {"table": "signups", "row": {"name": r, "plan": _word(rng)}}, result=ack)
        for r in rows
    ]


def _http_post(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("http_post", "http_put", "webhook_post", "api_request"))
    ack = rng.choice(("204 No Content", "HTTP/1.1 204 No Content", "202 Accepted", "200 OK"))
    paths = _distinct(rng, lambda r: f"/v1/{_word(r)}s/{_snake(r, 2)}", n)
    return [
        ToolCall(
            tool,
            {"url": f"https://api.{rng.choice(_DOMAINS)}{p}", "json": {"state": _word(rng)}},
            result=ack,
        )
        for p in paths
    ]


def _notify(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("notify", "set_flag", "mark_read", "feature_flag_set", "push_notification"))
    ack: Any = rng.choice(("true", True, "True"))
    targets = _distinct(rng, lambda r: f"{r.choice(_PEOPLE)}_{_word(r)}", n)
    return [ToolCall(tool, {"target": t, "message": _snake(rng)}, result=ack) for t in targets]


def _note(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("write_note", "save_memory", "add_todo", "append_log", "remember"))
    ack = rng.choice(("Done.", "Saved.", "Note saved.", "Memory stored."))
    notes = _distinct(rng, lambda r: f"{r.choice(_PEOPLE)} prefers the {_snake(r, 2)}", n)
    return [ToolCall(tool, {"text": t}, result=ack) for t in notes]


def _upload(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("upload", "upload_file", "s3_put_object", "drive_upload"))
    ack: Any = rng.choice(("Success", "Upload complete.", _mcp("Uploaded."), {"status": "ok"}))
    files = _distinct(rng, lambda r: _path(r, _snake(r), r.choice((".pdf", ".png", ".csv"))), n)
    return [ToolCall(tool, {"path": f, "bucket": "reports"}, result=ack) for f in files]


def _pytest(rng: random.Random, n: int) -> list[ToolCall]:
    """Each test run on its own: pytest says `1 passed` every time (only its timing moves)."""
    tests = _distinct(rng, lambda r: f"tests/test_{_word(r)}.py::test_{_snake(r)}", n)
    calls = []
    shell = rng.random() < 0.5
    for t in tests:
        out = f"1 passed in 0.0{rng.randint(1, 9)}s"
        if shell:
            calls.append(
                ToolCall("bash", {"command": f"python -m pytest -q {t}"}, result=_mini(0, out))
            )
        else:
            calls.append(ToolCall("run_tests", {"selector": t}, result=out))
    return calls


def _unlisted_editor(rng: random.Random, n: int) -> list[ToolCall]:
    """An editor's acknowledgement from a tool that is not on the built-in editor list."""
    tool = rng.choice(("apply_edit", "modify_file", "replace_in_file", "file_edit", "patch_file"))
    file = rng.choice(("app.py", "src/app.py", "settings.py", "utils/helpers.py"))
    olds = _distinct(rng, lambda r: f"{_snake(r)} = {r.randint(0, 99)}", n)
    ack = f"Successfully modified file: {file} (1 replacements)."
    return [
        ToolCall(tool, {"path": file, "old": o, "new": o.replace("=", "= 1 +")}, result=ack)
        for o in olds
    ]


def _curl_ok(rng: random.Random, n: int) -> list[ToolCall]:
    """A shell loop of API calls, each answered `{"status":"ok"}`."""
    names = _distinct(rng, lambda r: _snake(r, 2), n)
    body = rng.choice(('{"status":"ok"}', '{"ok":true}', "OK"))
    return [
        ToolCall(
            "bash",
            {"command": f'curl -s -X POST https://api.acme.io/v1/items -d \'{{"name": "{x}"}}\''},
            result=_mini(0, body),
        )
        for x in names
    ]


def _sql_insert(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("sql_execute", "run_query", "execute_sql"))
    ack = rng.choice(("INSERT 0 1", "1 row affected.", "Query OK, 1 row affected"))
    values = _distinct(rng, lambda r: f"('{r.choice(_PEOPLE)}', '{_snake(r)}')", n)
    return [
        ToolCall(tool, {"sql": f"INSERT INTO members (name, team) VALUES {v};"}, result=ack)
        for v in values
    ]


def _slack(rng: random.Random, n: int) -> list[ToolCall]:
    tool = rng.choice(("slack_post_message", "post_message", "send_chat_message"))
    ack = rng.choice((_mcp('{"ok": true}'), {"ok": True}, _mcp("Message posted.")))
    channels = _distinct(rng, lambda r: f"#{_word(r)}-{r.choice(_ADJECTIVES)}", n)
    return [
        ToolCall(tool, {"channel": c, "text": f"Deploy of {_snake(rng)} finished"}, result=ack)
        for c in channels
    ]


def _validate(rng: random.Random, n: int) -> list[ToolCall]:
    """A check run over many files, each clean: the acknowledgement names errors (none)."""
    tool = rng.choice(("validate_json", "lint_file", "check_schema", "yaml_lint"))
    ack = rng.choice(
        ("No errors found.", "OK: 0 errors, 0 warnings", "valid (errors: 0)", "0 problems")
    )
    files = _distinct(rng, lambda r: _path(r, _snake(r), r.choice((".json", ".yaml"))), n)
    return [ToolCall(tool, {"path": f}, result=ack) for f in files]


def _structured(rng: random.Random, n: int) -> list[ToolCall]:
    """An MCP tool with an output schema: the same text and `structuredContent` every time."""
    tool = rng.choice(("calendar_create_event", "crm_update_contact", "set_reminder"))
    data = rng.choice(({"ok": True}, {"status": "accepted"}, {"updated": True}))
    result = {"content": [{"type": "text", "text": json.dumps(data)}], "structuredContent": data}
    titles = _distinct(rng, lambda r: f"{r.choice(_PEOPLE)} / {_snake(r, 2)}", n)
    return [
        ToolCall(tool, {"title": t, "when": f"2026-12-{rng.randint(1, 28):02d}"}, result=result)
        for t in titles
    ]


_BULK_SHAPES: dict[str, Callable[[random.Random, int], list[ToolCall]]] = {
    "email sent": _email,
    "ticket created (MCP text)": _ticket,
    "label added (MCP, isError false)": _label,
    "row inserted (JSON object or text)": _insert_row,
    "HTTP 204/202/200 status line": _http_post,
    "boolean true": _notify,
    "note saved / Done.": _note,
    "upload succeeded": _upload,
    "pytest `1 passed`, one test each": _pytest,
    "editor acknowledgement, unlisted tool": _unlisted_editor,
    'curl in bash, `{"status":"ok"}`': _curl_ok,
    "SQL insert, `1 row affected`": _sql_insert,
    "chat message posted": _slack,
    "validation clean, `0 errors`": _validate,
    "MCP structuredContent acknowledgement": _structured,
}


# ---------------------------------------------------------------------------------------------
# Stuck: distinct calls failing the same way, the failure quoting the varied argument


def _syntax_error(rng: random.Random, n: int) -> list[ToolCall]:
    """`python3 -c` with a broken line: Python quotes the line and points at it with carets."""
    style = _shell_style(rng)
    variant = rng.choice(("unclosed", "print2", "assign"))
    args = _varied(rng, n, _snake)
    calls = []
    for a in args:
        if variant == "unclosed":
            source = f"print({a}"
            text = "'(' was never closed"
            caret = "     ^"
        elif variant == "print2":
            source = f'print "{a}"'
            text = "Missing parentheses in call to 'print'. Did you mean print(...)?"
            caret = "^" * len(source)
        else:
            source = f"{a} = = 1"
            text = "invalid syntax"
            caret = " " * (len(a) + 3) + "^"
        output = f'  File "<string>", line 1\n    {source}\n    {caret}\nSyntaxError: {text}'
        calls.append(_shell_failure(style, f"python3 -c '{source}'", 1, output))
    return calls


def _missing_file(rng: random.Random, n: int) -> list[ToolCall]:
    """sed / cat / ls / head / grep on files that are not there: each names the path."""
    style = _shell_style(rng)
    program = rng.choice(("sed", "cat", "ls", "head", "grep"))
    ext = rng.choice((".py", ".txt", ".cfg", ""))
    names = _varied(rng, n, _snake)
    folder = rng.choice(_DIRS)
    calls = []
    for name in names:
        path = f"{folder}/{name}{ext}"
        command, rc, out = {
            "sed": (
                f"sed -n 1,40p {path}",
                2,
                f"sed: can't read {path}: No such file or directory",
            ),
            "cat": (f"cat {path}", 1, f"cat: {path}: No such file or directory"),
            "ls": (
                f"ls -la {path}",
                2,
                f"ls: cannot access '{path}': No such file or directory",
            ),
            "head": (
                f"head -n 20 {path}",
                1,
                f"head: cannot open '{path}' for reading: No such file or directory",
            ),
            "grep": (f"grep -n 'def main' {path}", 2, f"grep: {path}: No such file or directory"),
        }[program]
        calls.append(_shell_failure(style, command, rc, out))
    return calls


def _old_str(rng: random.Random, n: int) -> list[ToolCall]:
    """An editor asked to replace text that is not in the file, quoting the text it sought."""
    style = _tool_style(rng)
    tool = rng.choice(("str_replace_editor", "str_replace_based_edit_tool", "edit_file"))
    path = f"/testbed/{_path(rng, _snake(rng, 1), '.py')}"
    line = f"def {_snake(rng, 2)}(self, {_word(rng)}):"
    templates = (
        f"{line}\n    return self.{{}}",
        f"    {{}} = {_word(rng)}.get('{_word(rng)}')",
        "{}if {{}} is None:".format(" " * rng.choice((0, 4, 8))),
    )
    olds = [rng.choice(templates).format(name) for name in _varied(rng, n, _snake)]
    calls = []
    for old in olds:
        params: dict[str, Any] = {"path": path, "old_str": old, "new_str": old + "  # fixed"}
        if tool != "edit_file":
            params = {"command": "str_replace", **params}
        text = f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        calls.append(_tool_failure(style, tool, params, text))
    return calls


def _apply_patch(rng: random.Random, n: int) -> list[ToolCall]:
    """A patch whose context is not in the file: the failure quotes the lines it looked for."""
    style = _tool_style(rng)
    tool = rng.choice(("apply_patch", "patch", "apply_diff"))
    file = _path(rng, _snake(rng, 1), ".py")
    contexts = _distinct(rng, lambda r: f"    {_snake(r)} = {_snake(r)}({_word(r)})", n)
    calls = []
    for ctx in contexts:
        patch = (
            f"*** Begin Patch\n*** Update File: {file}\n@@\n-{ctx}\n+{ctx}  # new\n*** End Patch"
        )
        text = f"Failed to find expected lines in {file}:\n{ctx}"
        calls.append(_tool_failure(style, tool, {"input": patch}, text))
    return calls


def _http_auth(rng: random.Random, n: int) -> list[ToolCall]:
    """An API that refuses the agent's token; its 401/403/404 body names the requested path."""
    tool = rng.choice(("http_get", "fetch_url", "api_call", "github_api"))
    status, title = rng.choice(((401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found")))
    host = f"https://api.{rng.choice(_DOMAINS)}"
    paths = _varied(rng, n, lambda r: f"/v2/{_word(r)}s/{_snake(r, 2)}")
    style = _tool_style(rng)
    calls = []
    for p in paths:
        body = json.dumps(
            {"status": status, "error": title, "message": f"{title} for {p}", "path": p}
        )
        params = {"url": host + p, "method": "GET"}
        if style == "labelled":
            calls.append(ToolCall(tool, params, result=body, error=f"HTTP {status}"))
        elif style == "mcp":
            calls.append(ToolCall(tool, params, result=_mcp(f"HTTP {status}: {body}", True)))
        else:
            calls.append(ToolCall(tool, params, error=f"HTTP {status} {title}: {body}"))
    return calls


def _file_not_found(rng: random.Random, n: int) -> list[ToolCall]:
    """A data tool raising FileNotFoundError for each file name the agent guesses."""
    style = _tool_style(rng)
    tool = rng.choice(("load_csv", "read_dataset", "pandas_read", "python_exec", "load_table"))
    names = _varied(rng, n, _snake)
    traceback = rng.random() < 0.5
    calls = []
    for name in names:
        path = f"data/{name}.csv"
        message = f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'"
        if traceback:
            message = (
                "Traceback (most recent call last):\n"
                '  File "/app/tools.py", line 41, in load\n'
                "    return pd.read_csv(path)\n" + message
            )
        params = {"code": f"pd.read_csv('{path}')"} if tool == "python_exec" else {"path": path}
        calls.append(_tool_failure(style, tool, params, message))
    return calls


def _unknown_user(rng: random.Random, n: int) -> list[ToolCall]:
    style = _tool_style(rng)
    tool = rng.choice(("get_user", "lookup_user", "find_customer", "get_user_details"))
    template = rng.choice(
        (
            "User '{}' not found",
            "Error: user {} does not exist",
            'No customer matches "{}".',
            "KeyError: '{}'",
        )
    )
    names = _varied(rng, n, lambda r: f"{r.choice(_PEOPLE)}_{r.choice(_PEOPLE)}")
    return [_tool_failure(style, tool, {"user_id": u}, template.format(u)) for u in names]


def _unknown_city(rng: random.Random, n: int) -> list[ToolCall]:
    style = _tool_style(rng)
    tool = rng.choice(("get_weather", "weather_lookup", "geocode", "get_forecast"))
    template = rng.choice(
        ("Unknown city: '{}'", 'Error: location "{}" not recognised', "City {} not found (404)")
    )
    cities = _varied(rng, n, lambda r: r.choice(_CITIES))
    return [_tool_failure(style, tool, {"city": c}, template.format(c)) for c in cities]


def _git_pathspec(rng: random.Random, n: int) -> list[ToolCall]:
    style = _shell_style(rng)
    branches = _varied(
        rng, n, lambda r: f"{r.choice(('feature', 'fix', 'release'))}/{_snake(r, 2)}"
    )
    return [
        _shell_failure(
            style,
            f"git checkout {b}",
            1,
            f"error: pathspec '{b}' did not match any file(s) known to git",
        )
        for b in branches
    ]


def _no_module(rng: random.Random, n: int) -> list[ToolCall]:
    """Guessing module or package names: Python and pip name the one that is missing."""
    style = _shell_style(rng)
    pip = rng.random() < 0.5
    modules = _varied(rng, n, _snake)
    calls = []
    for m in modules:
        if pip:
            name = m.replace("_", "-")
            out = (
                f"ERROR: Could not find a version that satisfies the requirement {name} "
                "(from versions: none)\n"
                f"ERROR: No matching distribution found for {name}"
            )
            calls.append(_shell_failure(style, f"pip install {name}", 1, out))
        else:
            out = (
                "Traceback (most recent call last):\n"
                '  File "<string>", line 1, in <module>\n'
                f"ModuleNotFoundError: No module named '{m}'"
            )
            calls.append(_shell_failure(style, f"python -c 'import {m}'", 1, out))
    return calls


def _sql_column(rng: random.Random, n: int) -> list[ToolCall]:
    """Queries naming a column or table that is not there; the error names it back."""
    style = _tool_style(rng)
    tool = rng.choice(("sql_query", "run_query", "query_db"))
    table = rng.random() < 0.5
    names = _varied(rng, n, _snake)
    calls = []
    for name in names:
        if table:
            sql = f"SELECT * FROM {name} LIMIT 5"
            text = f"sqlite3.OperationalError: no such table: {name}"
        else:
            sql = f"SELECT id, {name} FROM orders LIMIT 5"
            text = f'psycopg2.errors.UndefinedColumn: column "{name}" does not exist'
        calls.append(_tool_failure(style, tool, {"query": sql}, text))
    return calls


def _command_not_found(rng: random.Random, n: int) -> list[ToolCall]:
    """Guessing the name of a program: the shell names each guess it cannot find."""
    style = _shell_style(rng)
    tools = _varied(
        rng, n, lambda r: r.choice(_NOUNS) + r.choice(("ctl", "-cli", "run", "tool", ""))
    )
    return [
        _shell_failure(style, f"{t} --version", 127, f"bash: line 1: {t}: command not found")
        for t in tools
    ]


_STUCK_SHAPES: dict[str, Callable[[random.Random, int], list[ToolCall]]] = {
    "Python SyntaxError quoting the line, with carets": _syntax_error,
    "sed / cat / ls / head / grep: no such file": _missing_file,
    "editor: old_str did not appear verbatim": _old_str,
    "patch: expected lines not found": _apply_patch,
    "HTTP 401/403/404, the body names the path": _http_auth,
    "FileNotFoundError: 'data/<name>.csv'": _file_not_found,
    "unknown user": _unknown_user,
    "unknown city": _unknown_city,
    "git: pathspec did not match": _git_pathspec,
    "no module / no distribution named X": _no_module,
    "SQL: no such table / column": _sql_column,
    "shell: X: command not found": _command_not_found,
}


# ---------------------------------------------------------------------------------------------
# A survey: distinct items, each queued or not found


def _survey(rng: random.Random, n: int) -> list[ToolCall]:
    """Distinct items checked in turn: queued, or not found (at most 3 not-found in a row)."""
    style = _tool_style(rng)
    tool, param, make, queued, missing = rng.choice(
        (
            ("enqueue_job", "job", _snake, "queued", "Job '{}' not found"),
            ("request_refund", "order_id", lambda r: f"ord_{r.randint(1000, 99999)}", "Queued.",
             "Order {} not found"),
            ("invite_user", "username", lambda r: f"{r.choice(_PEOPLE)}{r.randint(1, 99)}",
             "Invitation queued", "User '{}' not found"),
            ("reindex_document", "doc", lambda r: _path(r, _snake(r)), "status: queued",
             "Error: document {} not found"),
        )
    )  # fmt: skip
    items = _distinct(rng, make, n)
    calls = []
    missing_in_a_row = 0
    for item in items:
        found = missing_in_a_row == 3 or rng.random() < 0.6
        missing_in_a_row = 0 if found else missing_in_a_row + 1
        if found:
            calls.append(ToolCall(tool, {param: item}, result=queued))
        else:
            calls.append(_tool_failure(style, tool, {param: item}, missing.format(item)))
    return calls


# ---------------------------------------------------------------------------------------------
# All of them


def scenarios(seed: int = 37, per_shape: int = 3, surveys: int = 8) -> list[Scenario]:
    """Every development scenario, the same for the same seed: `per_shape` of each bulk and
    stuck shape, and `surveys` surveys."""
    rng = random.Random(seed)
    found: list[Scenario] = []

    def add(kind: str, shape: str, name: str, body: list[ToolCall]) -> None:
        prefix = _prefix(rng)
        found.append(Scenario(kind, shape, name, [*prefix, *body], len(prefix)))

    for k in range(per_shape):
        for shape, make in _BULK_SHAPES.items():
            body = make(rng, rng.randint(10, 40))
            add(BULK, shape, f"bulk-{make.__name__.strip('_')}-{k}", body)
        for shape, make in _STUCK_SHAPES.items():
            body = make(rng, STUCK_CALLS)
            add(STUCK, shape, f"stuck-{make.__name__.strip('_')}-{k}", body)
    for k in range(surveys):
        add(SURVEY, "survey: queued or not found", f"survey-{k}", _survey(rng, rng.randint(15, 40)))
    return found
