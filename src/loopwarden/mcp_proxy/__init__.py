"""``loopwarden mcp-proxy``: loop protection in front of any MCP server, for any MCP client.

Needs the ``mcp`` extra (``pip install 'loopwarden[mcp]'``). The proxy serves one client over
stdio and forwards everything to the wrapped server (a command started over stdio, or a
streamable-HTTP URL); only ``tools/call`` goes through the :class:`~loopwarden.LoopGuard`.
"""

from loopwarden.mcp_proxy._downstream import DownstreamSpec, DownstreamUnavailable
from loopwarden.mcp_proxy._guarding import COMPACTED_KEY, RUN_ID_KEY
from loopwarden.mcp_proxy._proxy import ProxyOptions, serve

__all__ = [
    "COMPACTED_KEY",
    "RUN_ID_KEY",
    "DownstreamSpec",
    "DownstreamUnavailable",
    "ProxyOptions",
    "serve",
]
