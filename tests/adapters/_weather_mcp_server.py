"""A stdio MCP server for the Agents SDK adapter test: ``get_weather`` counts its real runs.

Each execution appends one line to the file named by the first argument, so the test can tell
how many calls reached the server (a call the guard blocks never does).
"""

from __future__ import annotations

import sys

from mcp.server.fastmcp import FastMCP

app = FastMCP("loopwarden-weather", log_level="WARNING")
COUNTER = sys.argv[1]


@app.tool()
def get_weather(city: str) -> str:
    """Current weather of a city."""
    with open(COUNTER, "a", encoding="utf-8") as handle:
        handle.write("get_weather\n")
    return f"It is 21C in {city}."


if __name__ == "__main__":
    app.run("stdio")
