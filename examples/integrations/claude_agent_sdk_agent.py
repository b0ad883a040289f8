"""Claude Agent SDK + loopwarden: Claude Code's tool calls go through a loop guard.

pip install '.[claude-agent-sdk]' && python examples/integrations/claude_agent_sdk_agent.py
"""

import asyncio

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ResultMessage,
    ToolResultBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from loopwarden import LoopGuard
from loopwarden.adapters.claude_agent_sdk import guard_options


@tool("get_weather", "Current weather of a city.", {"city": str})
async def get_weather(args):
    return {"content": [{"type": "text", "text": f"It is 21C in {args['city']}."}]}


guard = LoopGuard({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5})
options = guard_options(
    ClaudeAgentOptions(
        mcp_servers={"weather": create_sdk_mcp_server("weather", tools=[get_weather])},
        allowed_tools=["mcp__weather__get_weather"],
    ),
    guard,
)


async def main():
    async for message in query(prompt="What's the weather in Paris?", options=options):
        if isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, ToolResultBlock):  # what the model is shown
                    content = block.content
                    text = content if isinstance(content, str) else content[0]["text"]
                    print(" tool:", text)
        elif isinstance(message, ResultMessage):
            print("answer:", message.result)


asyncio.run(main())
