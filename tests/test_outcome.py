"""Outcome hashing and unknown-tool names."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.core.canonical import UNDEFINED, digest_stable, hash_tool_call, stable_stringify
from loopwarden.core.outcome import extract_unknown_tool_name, hash_tool_outcome

from _support import data_path


def _result(text: str = "", **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


def _hash(tool: str, params: Any, result: Any = UNDEFINED, error: Any = UNDEFINED) -> str | None:
    return hash_tool_outcome(tool, params, result, error)[0]


# --------------------------------------------------------------------------------------------
# Scenario vectors: every hash and outcome output, checked here without the history layer
# --------------------------------------------------------------------------------------------


def test_scenario_vectors_outcome_and_signature_outputs() -> None:
    checked, failures = 0, []
    with gzip.open(data_path("conformance", "scenarios.jsonl.gz"), "rt", encoding="utf-8") as f:
        scripts = [json.loads(line) for line in f]
    for script in scripts:
        steps = [s for s in script["steps"] if s["op"] != "call"]  # calls output nothing
        for index, (step, expected) in enumerate(
            zip(steps, script["expected"]["outputs"], strict=True)
        ):
            got = _scenario_output(step)
            if got is _SKIP:
                continue
            checked += 1
            if got != expected:
                failures.append(f"{script['id']} step {index}: {got!r} != {expected!r}")
    assert checked > 15_000
    assert not failures, f"{len(failures)} outputs differ:\n" + "\n".join(failures[:20])


_SKIP = object()


def _scenario_output(step: dict[str, Any]) -> object:
    if step["op"] == "hash":
        return hash_tool_call(step["tool"], step["params"])
    if step["op"] != "outcome":
        return _SKIP  # detection belongs to the history/detector tests
    kwargs: dict[str, Any] = {}
    if "result" in step:
        kwargs["result"] = step["result"]
    if "error" in step:
        error = step["error"]
        kwargs["error"] = Exception(error) if step.get("errorIsErrorObject") else error
    result_hash, unknown = hash_tool_outcome(step["tool"], step["params"], **kwargs)
    if result_hash is None:
        return None  # nothing is stored
    return {"resultHash": result_hash, "unknownToolName": unknown}


# --------------------------------------------------------------------------------------------
# Rule 1: errors
# --------------------------------------------------------------------------------------------


def test_exception_error_hashes_its_message() -> None:
    assert _hash("t", {}, error=RuntimeError("rate limited")) == "error:" + digest_stable(
        "rate limited"
    )


def test_exception_and_string_with_same_text_hash_the_same() -> None:
    assert _hash("t", {}, error=ValueError("boom")) == _hash("t", {}, error="boom")


def test_exception_with_empty_message_hashes_its_class_name() -> None:
    assert _hash("t", {}, error=TimeoutError()) == "error:" + digest_stable("TimeoutError")


@pytest.mark.parametrize(
    ("error", "text"),
    [(3, "3"), (2.0, "2"), (0.5, "0.5"), (True, "true"), (False, "false"), (float("nan"), "NaN")],
)
def test_number_and_bool_errors_are_written_as_javascript_does(error: object, text: str) -> None:
    assert _hash("t", {}, error=error) == "error:" + digest_stable(text)


def test_other_error_values_hash_their_canonical_text() -> None:
    error = {"code": 7, "why": ["x"]}
    assert _hash("t", {}, error=error) == "error:" + digest_stable(stable_stringify(error))


def test_error_wins_over_result() -> None:
    assert _hash("t", {}, result=_result("ok"), error="bad") == "error:" + digest_stable("bad")


def test_none_error_means_no_error() -> None:
    assert _hash("t", {}, result="ok", error=None) == digest_stable("ok")


# --------------------------------------------------------------------------------------------
# Rule 3.1: unknown tool names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Unknown tool: Weather", "weather"),
        ("unknown tool 'search.web'", "search.web"),
        ('UNKNOWN TOOL:  "my-tool_2"', "my-tool_2"),
        ("Tool exec not found", "exec"),
        ("tool 'fetch' is not available", "fetch"),
        ('  tool "X"  is not available  ', "x"),
        ("rate limited", None),
        ("tool exec failed", None),
        ("unknown tool: \u212aelvin", None),  # JS /i folds ASCII only: the Kelvin sign is no "k"
        ("unknown tool:\ufeffweather", "weather"),  # U+FEFF is JavaScript whitespace
        ("unknown tool:\x1cweather", None),  # U+001C is Python whitespace, not JavaScript's
    ],
)
def test_unknown_tool_name_extraction(text: str, name: str | None) -> None:
    assert extract_unknown_tool_name(text) == name


def test_error_outcome_reports_the_unknown_tool_name() -> None:
    result_hash, unknown = hash_tool_outcome(
        "weather", {}, error=Exception("Unknown tool: Weather")
    )
    assert result_hash == "error:" + digest_stable("Unknown tool: Weather")
    assert unknown == "weather"


def test_results_never_report_unknown_tools() -> None:
    assert hash_tool_outcome("t", {}, result="Unknown tool: weather")[1] is None


# --------------------------------------------------------------------------------------------
# Rule 2: non-dict results
# --------------------------------------------------------------------------------------------


def test_missing_result_has_no_hash() -> None:
    assert hash_tool_outcome("t", {}) == (None, None)


@pytest.mark.parametrize("result", ["text", ["a", 1], None, 3, 2.5, True])
def test_non_dict_results_hash_their_canonical_form(result: object) -> None:
    assert _hash("t", {}, result=result) == digest_stable(result)


# --------------------------------------------------------------------------------------------
# Rules 3, 4, 8: text, loop vetoes, default
# --------------------------------------------------------------------------------------------


def test_default_hashes_details_and_trimmed_joined_text() -> None:
    result = {
        "content": [
            {"type": "text", "text": "\ufeff one"},
            {"type": "image", "text": "two"},
            {"type": "text"},  # no text: skipped
            {"type": 1, "text": "typed badly"},  # non-string type: skipped
            "not a dict",
            {"type": "text", "text": "three \n"},
        ],
        "details": {"n": 1},
    }
    expected = digest_stable({"details": {"n": 1}, "text": "one\ntwo\nthree"})
    assert _hash("read", {}, result=result) == expected


def test_details_that_are_not_a_dict_count_as_empty() -> None:
    result = {"content": "not a list", "details": ["x"]}
    assert _hash("read", {}, result=result) == digest_stable({"details": {}, "text": ""})


def test_loop_veto_result_has_no_hash() -> None:
    veto = {
        "content": [{"type": "text", "text": "CRITICAL: ..."}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": "CRITICAL"},
    }
    assert hash_tool_outcome("exec", {"command": "ls"}, veto) == (None, None)


def test_other_blocked_results_are_hashed() -> None:
    blocked = _result("denied", status="blocked", deniedReason="policy")
    assert _hash("exec", {}, result=blocked) is not None
    assert _hash("read", {}, result=blocked) == digest_stable(
        {"details": {"status": "blocked", "deniedReason": "policy"}, "text": "denied"}
    )


# --------------------------------------------------------------------------------------------
# Rule 5: exec
# --------------------------------------------------------------------------------------------


def test_exec_running_hashes_status_and_tail_only() -> None:
    first = _result("x", status="running", tail="building...", pid=1, durationMs=10)
    second = _result("y", status="running", tail="building...", pid=2, durationMs=99)
    assert _hash("exec", {}, result=first) == _hash("exec", {}, result=second)
    assert _hash("exec", {}, result=first) == digest_stable(
        {"status": "running", "tail": "building..."}
    )
    no_tail = _result(status="running", tail=5)
    assert _hash("exec", {}, result=no_tail) == digest_stable({"status": "running", "tail": ""})


def test_exec_running_with_new_output_is_progress() -> None:
    first = _result(status="running", tail="step 1")
    second = _result(status="running", tail="step 2")
    assert _hash("exec", {}, result=first) != _hash("exec", {}, result=second)


def test_exec_completed_ignores_runtime_metadata() -> None:
    first = _result("", status="completed", exitCode=0, aggregated="ok\n", durationMs=5, pid=10)
    second = _result("", status="completed", exitCode=0, aggregated="ok", durationMs=9, cwd="/w")
    assert _hash("exec", {}, result=first) == _hash("exec", {}, result=second)
    assert _hash("exec", {}, result=first) == digest_stable(
        {"status": "completed", "exitCode": 0, "timedOut": False, "output": "ok"}
    )


def test_exec_failed_uses_text_when_aggregated_is_blank() -> None:
    result = _result(" error text ", status="failed", exitCode=2, aggregated=" \n", timedOut=True)
    assert _hash("exec", {}, result=result) == digest_stable(
        {"status": "failed", "exitCode": 2, "timedOut": True, "output": "error text"}
    )


def test_exec_exit_code_that_is_not_a_number_is_null() -> None:
    odd = _result("out", status="completed", exitCode="0", timedOut="yes")
    assert _hash("exec", {}, result=odd) == digest_stable(
        {"status": "completed", "exitCode": None, "timedOut": False, "output": "out"}
    )
    boolean = _result("out", status="completed", exitCode=True)
    assert _hash("exec", {}, result=boolean) == _hash("exec", {}, result=odd)


def test_exec_different_exit_codes_differ() -> None:
    ok = _result(status="completed", exitCode=0, aggregated="same")
    bad = _result(status="completed", exitCode=1, aggregated="same")
    assert _hash("exec", {}, result=ok) != _hash("exec", {}, result=bad)


@pytest.mark.parametrize("status", ["approval-pending", "approval-unavailable"])
def test_exec_approval_hashes_reason_host_command_warning(status: str) -> None:
    result = _result("t", status=status, reason="needs ok", host="h", command="rm -rf", pid=3)
    assert _hash("exec", {}, result=result) == digest_stable(
        {
            "status": status,
            "reason": "needs ok",
            "host": "h",
            "command": "rm -rf",
            "warningText": "",
        }
    )
    bare = _result("t", status=status, reason=1)
    assert _hash("exec", {}, result=bare) == digest_stable(
        {"status": status, "reason": None, "host": None, "command": "", "warningText": ""}
    )


def test_exec_other_status_falls_through_to_default() -> None:
    result = _result("t", status="queued", pid=3)
    expected = digest_stable({"details": {"status": "queued", "pid": 3}, "text": "t"})
    assert _hash("exec", {}, result=result) == expected


def test_exec_status_must_be_a_string() -> None:
    result = _result("t", status=1, tail="x")
    assert _hash("exec", {}, result=result) == digest_stable(
        {"details": {"status": 1, "tail": "x"}, "text": "t"}
    )


# --------------------------------------------------------------------------------------------
# Rule 6: process poll / log
# --------------------------------------------------------------------------------------------


def test_process_poll_hashes_status_exit_and_output() -> None:
    result = _result("line", status="running", aggregated="out", totalLines=3, pid=9)
    assert _hash("process", {"action": "poll"}, result=result) == digest_stable(
        {
            "action": "poll",
            "status": "running",
            "exitCode": None,
            "exitSignal": None,
            "aggregated": "out",
            "text": "line",
        }
    )


def test_process_poll_missing_status_is_undefined_not_null() -> None:
    missing = _result("line")
    null = _result("line", status=None)
    assert _hash("process", {"action": "poll"}, result=missing) == digest_stable(
        {
            "action": "poll",
            "status": UNDEFINED,
            "exitCode": None,
            "exitSignal": None,
            "aggregated": None,
            "text": "line",
        }
    )
    assert _hash("process", {"action": "poll"}, result=missing) != _hash(
        "process", {"action": "poll"}, result=null
    )


def test_process_log_hashes_counts_and_truncation() -> None:
    result = _result("tail", status="exited", totalLines=10, totalChars=99, exitCode=0, extra=1)
    assert _hash("process", {"action": "log", "sessionId": "s"}, result=result) == digest_stable(
        {
            "action": "log",
            "status": "exited",
            "totalLines": 10,
            "totalChars": 99,
            "truncated": None,
            "exitCode": 0,
            "exitSignal": None,
            "text": "tail",
        }
    )


def test_process_other_actions_use_default() -> None:
    result = _result("x", status="running")
    expected = digest_stable({"details": {"status": "running"}, "text": "x"})
    assert _hash("process", {"action": "kill"}, result=result) == expected
    assert _hash("process", "poll", result=result) == expected  # params must be a dict


# --------------------------------------------------------------------------------------------
# Rule 7: volatile send results
# --------------------------------------------------------------------------------------------


def _send_result(message_id: str, ts: int, text: str = "sent") -> dict[str, Any]:
    return _result(
        text,
        ok=True,
        messageId=message_id,
        runId="r-" + message_id,
        receipt={"platformMessageId": "p-" + message_id},
        route={"id": "r2"},
        ts=ts,
        message={"id": message_id, "text": "ping", "direction": "outbound"},
        items=[{"fileId": message_id, "name": "a.txt", "createdAt": ts}],
    )


def test_send_results_differing_only_in_ids_hash_the_same() -> None:
    params = {"action": "send", "target": "chat", "text": "ping"}
    first = _hash("message", params, result=_send_result("m1", 1, text="id m1"))
    second = _hash("message", params, result=_send_result("m2", 2, text="id m2"))
    assert first == second
    assert first == digest_stable(
        {
            "ok": True,
            "route": {"id": "r2"},
            "message": {"text": "ping", "direction": "outbound"},
            "items": [{"name": "a.txt"}],
        }
    )


def test_sessions_send_is_a_send_tool_whatever_the_action() -> None:
    params = {"action": "anything"}
    first = _hash("sessions_send", params, result=_send_result("m1", 1))
    assert first == _hash("sessions_send", params, result=_send_result("m2", 2))


@pytest.mark.parametrize(
    "action",
    [
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    ],
)
def test_every_message_send_action_strips_ids(action: str) -> None:
    params = {"action": action}
    first = _hash("message", params, result=_send_result("m1", 1))
    assert first == _hash("message", params, result=_send_result("m2", 2))


def test_message_read_is_not_a_send_so_new_messages_are_progress() -> None:
    params = {"action": "read"}
    first = _hash("message", params, result=_send_result("m1", 1))
    assert first != _hash("message", params, result=_send_result("m2", 2))


def test_host_declared_send_tool_strips_ids() -> None:
    def outcome(result: dict[str, Any]) -> str | None:
        return hash_tool_outcome("slack_post", {}, result, send_tools={"slack_post"})[0]

    assert outcome(_send_result("m1", 1)) == outcome(_send_result("m2", 2))
    assert _hash("slack_post", {}, result=_send_result("m1", 1)) != _hash(
        "slack_post", {}, result=_send_result("m2", 2)
    )


@pytest.mark.parametrize(
    ("obj", "keeps_id"),
    [
        ({"id": "x", "text": "t", "direction": "in"}, False),
        ({"id": "x", "text": "t", "senderId": "u"}, False),
        ({"id": "x", "text": "t", "accountId": "a"}, False),
        ({"id": "x", "text": "t", "conversation": {}}, False),
        ({"id": "x", "text": "t"}, True),  # no sender/direction/conversation: not a message
        ({"id": "x", "text": "t", "conversation": "c"}, True),  # conversation must be a dict
        ({"id": 5, "text": "t", "direction": "in"}, True),  # id must be a string
        ({"id": "x", "text": None, "direction": "in"}, True),  # text must be a string
    ],
)
def test_id_is_dropped_only_on_message_objects(obj: dict[str, Any], keeps_id: bool) -> None:
    result = _result("t", wrapper=[obj])
    expected_obj = dict(obj) if keeps_id else {k: v for k, v in obj.items() if k != "id"}
    expected = digest_stable({"wrapper": [expected_obj]})
    assert _hash("sessions_send", {}, result=result) == expected


def test_send_details_with_cycles_and_deep_nesting_hash() -> None:
    details: dict[str, Any] = {"messageId": "m"}
    details["self"] = details
    node = details
    for _ in range(5_000):
        child: dict[str, Any] = {"ts": 1}
        node["next"] = child
        node = child
    result = {"content": [], "details": details}
    assert _hash("sessions_send", {}, result=result) is not None


# --------------------------------------------------------------------------------------------
# update_plan
# --------------------------------------------------------------------------------------------


def test_update_plan_result_ignores_step_wording_and_text() -> None:
    first = _result("Plan updated", plan=[{"step": "do x", "status": "done"}])
    second = _result("Plan saved!", plan=[{"step": "do y", "status": "done"}])
    assert _hash("update_plan", {}, result=first) == _hash("update_plan", {}, result=second)
    assert _hash("update_plan", {}, result=first) == digest_stable(
        {
            "details": {
                "planLength": 1,
                "statuses": ["done"],
                "stepPresence": [True],
                "hasExplanation": False,
            },
            "text": "",
        }
    )


def test_update_plan_result_status_change_is_progress() -> None:
    first = _result(plan=[{"step": "do x", "status": "pending"}])
    second = _result(plan=[{"step": "do x", "status": "done"}])
    assert _hash("update_plan", {}, result=first) != _hash("update_plan", {}, result=second)


# --------------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------------


class _NoCompare:
    """Like a numpy array: == raises, so rules must not compare it with strings naively."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("ambiguous truth value")

    __hash__ = object.__hash__


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=5)
    | st.binary()
    | st.builds(_NoCompare),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=15,
)
_results = st.fixed_dictionaries(
    {},
    optional={
        "content": st.lists(
            st.fixed_dictionaries({}, optional={"type": _values, "text": _values}) | _values,
            max_size=3,
        )
        | _values,
        "details": st.fixed_dictionaries(
            {},
            optional={
                "status": st.sampled_from(
                    ["running", "completed", "failed", "approval-pending", "blocked", "x"]
                )
                | _values,
                "deniedReason": st.just("tool-loop") | _values,
                "aggregated": _values,
                "exitCode": _values,
                "tail": _values,
            },
        )
        | _values,
    },
)


@settings(max_examples=300)
@given(
    st.sampled_from(["exec", "process", "message", "sessions_send", "update_plan", "read"]),
    st.fixed_dictionaries(
        {}, optional={"action": st.sampled_from(["poll", "log", "send"]) | _values}
    )
    | _values,
    _results | _values,
    st.none() | st.just(UNDEFINED) | _values | st.builds(Exception, st.text(max_size=5)),
)
def test_outcome_hashing_never_raises(tool: str, params: Any, result: Any, error: Any) -> None:
    result_hash, unknown = hash_tool_outcome(tool, params, result, error)
    assert result_hash is None or len(result_hash.removeprefix("error:")) == 64
    assert unknown is None or unknown == unknown.lower()
