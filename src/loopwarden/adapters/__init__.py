"""Framework adapters: loop protection for LangChain, the OpenAI Agents SDK, PydanticAI, Google ADK,
the Claude Agent SDK and CrewAI.

Each adapter is an optional extra and lives in its own module, imported only when you ask for it,
so ``import loopwarden`` never pulls in a framework::

    from loopwarden.adapters.langchain import LoopGuardMiddleware      # loopwarden[langchain]
    from loopwarden.adapters.openai_agents import guard_agent          # loopwarden[openai-agents]
    from loopwarden.adapters.pydantic_ai import LoopGuardCapability    # loopwarden[pydantic-ai]
    from loopwarden.adapters.google_adk import LoopGuardPlugin         # loopwarden[google-adk]
    from loopwarden.adapters.claude_agent_sdk import guard_options  # loopwarden[claude-agent-sdk]
    from loopwarden.adapters.crewai import guard_crew                  # loopwarden[crewai]

This package itself imports nothing heavy: only the framework-free ``LoopStopped`` error that the
adapters raise when the guard ends a run.
"""

from __future__ import annotations

from loopwarden.adapters._common import LoopStopped

__all__ = ["LoopStopped"]
