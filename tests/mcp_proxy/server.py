"""A small MCP server for the mcp-proxy tests: its tools count their real executions.

Every tool execution appends the tool's name as one line to the file named by the
``LOOPWARDEN_TEST_COUNTER`` environment variable *before* doing its work, so a test can tell
how many calls actually reached the server (a call the proxy blocks never gets here).

Run over stdio (default) or streamable HTTP::

    python tests/mcp/server.py
    python tests/mcp/server.py --http PORT
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import anyio
from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.tools import Tool
from pydantic import BaseModel, ConfigDict

app = FastMCP(
    "loopwarden-test-server",
    instructions="Test server for loopwarden mcp-proxy.",
    log_level="WARNING",
)


def _count(tool: str) -> None:
    """Record one real execution of ``tool`` (append-only, flushed at once)."""
    path = os.environ.get("LOOPWARDEN_TEST_COUNTER")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(tool + "\n")


@app.tool()
def poll(job: str) -> str:
    """Report the status of a job. It never finishes, so repeated polls make no progress."""
    _count("poll")
    return f"job {job}: still running"


# Annotated tools (loopwarden derives per-tool policies from annotations): a read-only status
# whose job advances at every call, one whose job never does, and two destructive tools, one
# idempotent and one not.
_steps: dict[str, int] = {}


@app.tool(annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def watch(job: str) -> str:
    """Report a job's progress: it advances one step at every call."""
    _count("watch")
    _steps[job] = _steps.get(job, 0) + 1
    return f"job {job}: step {_steps[job]}"


@app.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
def status(job: str) -> str:
    """Report a job's status; it never changes."""
    _count("status")
    return f"job {job}: still running"


@app.tool(annotations=types.ToolAnnotations(destructiveHint=True, idempotentHint=False))
def shred(path: str) -> str:
    """Overwrite a file with noise (pretend): every call destroys again."""
    _count("shred")
    return f"shredded {path}"


@app.tool(
    annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)
)
def reset(path: str) -> str:
    """Reset a file to empty (pretend): a second call changes nothing more."""
    _count("reset")
    return f"reset {path}"


@app.tool()
def echo(text: str) -> str:
    """Return the given text unchanged."""
    _count("echo")
    return text


# Outcomes whose failure only the result's isError tells: a fetch that fails quoting its own
# argument, an enqueue that acknowledges every item alike, and a lookup whose successful answer
# reads like an error.
@app.tool()
def fetch(url: str) -> str:
    """Fetch a URL: the upstream is down, so every call fails naming its URL (isError)."""
    _count("fetch")
    raise RuntimeError(f"GET {url}: 503 Service Unavailable")


@app.tool()
def enqueue(item: str) -> str:
    """Queue an item: every call is acknowledged with the same text."""
    _count("enqueue")
    return "accepted"


@app.tool()
def lookup(key: str) -> str:
    """Look a key up: it succeeds (no isError) with a text that reads like an error."""
    _count("lookup")
    return "Error: no entry (an empty answer is a valid answer here)"


@app.tool()
def quota(key: str) -> types.CallToolResult:
    """Fail (isError) with one text whatever the key."""
    _count("quota")
    text = types.TextContent(type="text", text="quota exceeded, try again later")
    return types.CallToolResult(content=[text], isError=True)


class Forecast(BaseModel):
    """A structured result whose schema allows other keys (JSON Schema's default)."""

    city: str
    celsius: int


class StrictForecast(Forecast):
    """The same result under a closed schema (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")


@app.tool()
def forecast(city: str) -> Forecast:
    """A structured weather forecast (``structuredContent`` plus its text)."""
    _count("forecast")
    return Forecast(city=city, celsius=21)


@app.tool()
def strict_forecast(city: str) -> StrictForecast:
    """The forecast under a closed output schema."""
    _count("strict_forecast")
    return StrictForecast(city=city, celsius=21)


@app.tool()
def blob(size: int) -> str:
    """Return ``size`` bytes of text (large results: tests and bench/bench_mcp_proxy.py)."""
    _count("blob")
    line = "0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:-+*/\n"
    return (line * (size // len(line) + 1))[:size]


@app.tool()
async def slow_echo(text: str) -> str:
    """Return the text after a short wait, so that calls sent together overlap in flight."""
    _count("slow_echo")
    await anyio.sleep(0.5)
    return text


@app.tool()
def boom() -> str:
    """Always fail with an exception (the server turns it into an isError result)."""
    _count("boom")
    raise ValueError("boom: this tool always fails")


@app.tool()
def pid() -> int:
    """Return this server's process id (tests use it to check that no process is orphaned)."""
    _count("pid")
    return os.getpid()


@app.tool()
def crash() -> str:
    """Kill the server process mid-call, as a crashing server would."""
    _count("crash")
    os._exit(3)


@app.tool()
async def die_mid_answer(ctx: Context, size: int) -> str:  # type: ignore[type-arg]
    """Write the first ``size`` bytes of a large answer to stdout, then die, as a server
    killed while sending a 22 MB result would (the answer's id comes first, as the SDK's)."""
    _count("die_mid_answer")
    # The SDK writes its answers from a task of its own: a client that sends this call right
    # after initialize (as the test does) would otherwise, on a busy machine, see the server die
    # before the initialize answer left it. Half a second lets that answer go out first.
    await anyio.sleep(0.5)
    head = {"jsonrpc": "2.0", "id": ctx.request_context.request_id}
    start = json.dumps(head)[:-1] + ', "result": {"content": [{"type": "text", "text": "'
    os.write(1, start.encode() + b"x" * size)
    os._exit(3)


@app.tool()
async def hang() -> str:
    """Never answer; a cancellation from the client is counted as ``hang_cancelled``."""
    _count("hang")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        _count("hang_cancelled")
        raise
    return "unreachable"


@app.tool()
async def bad_result(ctx: Context) -> str:  # type: ignore[type-arg]
    """Answer this request with a malformed result (written by hand), then never answer."""
    _count("bad_result")
    line = {"jsonrpc": "2.0", "id": ctx.request_id, "result": {"content": "not-a-list"}}
    os.write(sys.stdout.fileno(), (json.dumps(line) + "\n").encode())
    await anyio.sleep(3600)
    return "unreachable"


@app.tool()
def garbage() -> str:
    """Write a line that is not JSON-RPC to stdout, then answer normally."""
    _count("garbage")
    os.write(sys.stdout.fileno(), b"this is not json-rpc\n")
    return "answered after garbage"


@app.tool()
async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report ``steps`` progress notifications and one log message, then answer."""
    _count("progress")
    await ctx.info("progress tool started")
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done after {steps} steps"


def _late() -> str:
    """A tool that only exists after ``add_tool`` ran."""
    _count("late")
    return "late tool answered"


@app.tool()
async def add_tool(ctx: Context) -> str:  # type: ignore[type-arg]
    """Register the ``late`` tool and tell the client that the tool list changed."""
    _count("add_tool")
    app._tool_manager._tools["late"] = Tool.from_function(_late, name="late")
    await ctx.session.send_tool_list_changed()
    return "added"


@app.tool()
async def ask_model(question: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the client's model (sampling) and return its answer."""
    _count("ask_model")
    result = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=question)
            )
        ],
        max_tokens=32,
    )
    content = result.content
    return content.text if isinstance(content, types.TextContent) else repr(content)


@app.tool()
async def roots(ctx: Context) -> str:  # type: ignore[type-arg]
    """Return the client's roots, comma-separated."""
    _count("roots")
    listed = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in listed.roots)


@app.tool()
def meta_keys(ctx: Context) -> str:  # type: ignore[type-arg]
    """Return the ``_meta`` keys this request arrived with, comma-separated."""
    _count("meta_keys")
    meta = ctx.request_context.meta
    return ",".join(sorted(meta.model_dump(exclude_none=True))) if meta else ""


@app.resource("counter://info", mime_type="text/plain")
def info() -> str:
    """A static resource, to check that resources pass through the proxy."""
    return "loopwarden test server resource"


@app.prompt()
def greet(name: str) -> str:
    """A prompt, to check that prompts pass through the proxy."""
    return f"Say hello to {name}."


def main() -> None:
    """Serve over stdio, or streamable HTTP on ``--http PORT``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument(
        "--once", metavar="FILE", help="start only if FILE does not exist (then create it)"
    )
    parser.add_argument(
        "--api-key", help="ignored: a secret on the command line, which the proxy must not show"
    )
    parser.add_argument(
        "--slow-start", type=float, default=0.0, metavar="SECONDS", help="wait before serving"
    )
    args = parser.parse_args()
    if args.slow_start:
        import time

        time.sleep(args.slow_start)  # a server that is slow to start (npx fetching a package)
    if args.once:
        if os.path.exists(args.once):
            sys.exit(7)  # a server that cannot be restarted
        open(args.once, "w").close()
    if args.http is None:
        app.run("stdio")
        return
    app.settings.port = args.http
    app.run("streamable-http")


if __name__ == "__main__":
    main()
