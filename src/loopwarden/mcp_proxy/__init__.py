"""``loopwarden mcp-proxy``: loop protection in front of any MCP server, for any MCP client.

The proxy serves one client over stdio and relays every message to the wrapped server (a
command started over stdio, or a streamable-HTTP URL) as it is; only ``tools/call`` goes
through the :class:`~loopwarden.LoopGuard`. The stdio path needs no MCP SDK; a URL needs the
``mcp`` extra (``pip install '.[mcp]'`` from the repository's root), 1.x or 2.x.
"""

from loopwarden.mcp_proxy._downstream import DownstreamSpec, DownstreamUnavailable
from loopwarden.mcp_proxy._guarding import COMPACTED_KEY, RUN_ID_KEY
from loopwarden.mcp_proxy._proxy import ProxyOptions, run, serve

__all__ = [
    "COMPACTED_KEY",
    "RUN_ID_KEY",
    "DownstreamSpec",
    "DownstreamUnavailable",
    "ProxyOptions",
    "run",
    "serve",
]
