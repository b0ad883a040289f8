"""OpenAI Agents SDK + loopwarden: an agent whose model keeps making the same tool call.

pip install '.[openai-agents]' && python examples/integrations/openai_agents_agent.py
"""

import asyncio

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, function_call

from loopwarden import LoopGuard
from loopwarden.adapters.openai_agents import LoopStopped, guard_agent

set_tracing_disabled(True)  # this demo stays offline


@function_tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"It is 21C in {city}."


# Stands in for a real model (leave `model` out to use OpenAI): the same call, again and again.
stuck = ScriptedModel(
    [function_call("get_weather", {"city": "Paris"}, call_id=f"c{i}")] for i in range(6)
)

# stopAfterBlocks: end the run at the first blocked call instead of letting the model retry.
guard = LoopGuard(
    {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "stopAfterBlocks": 1}
)
agent = guard_agent(Agent(name="weather", model=stuck, tools=[get_weather]), guard)

try:
    asyncio.run(Runner.run(agent, "What's the weather in Paris?"))
except LoopStopped as stop:
    for call in stuck.calls[1:]:  # what the model was shown after each tool call
        print(" tool:", call.input[-1]["output"])
    print("stopped:", stop.reason)
