"""CrewAI + loopwarden: a crew whose model keeps making the same tool call.

pip install '.[crewai]' && python examples/integrations/crewai_agent.py
"""

import json

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

from loopwarden import LoopGuard
from loopwarden.adapters.crewai import LoopStopped, guard_crew


@tool("get_weather")
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"It is 21C in {city}."


class StuckModel(BaseLLM):
    """Stands in for a real model (llm="gpt-5.2" in real code): the same call, again and again."""

    def supports_function_calling(self):
        return True

    def call(self, messages, *args, **kwargs):
        if messages[-1]["role"] == "tool":  # what the model is shown for its last call
            print(" tool:", messages[-1]["content"])
        call = {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
        return [{"id": "call", "type": "function", "function": call}]


# stopAfterBlocks: end the run at the first blocked call instead of letting the model retry.
guard = LoopGuard(
    {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "stopAfterBlocks": 1}
)
llm = StuckModel(model="stuck")
agent = Agent(role="forecaster", goal="weather", backstory="-", llm=llm, tools=[get_weather])
task = Task(description="What's the weather in Paris?", expected_output="it", agent=agent)
crew = guard_crew(Crew(agents=[agent], tasks=[task]), guard)

try:
    crew.kickoff()
except LoopStopped as stop:
    print("stopped:", stop.reason)
