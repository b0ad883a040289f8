"""Google ADK + loopwarden: an agent whose model keeps making the same tool call.

pip install '.[google-adk]' && python examples/integrations/google_adk_agent.py
"""

import asyncio

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from loopwarden import LoopGuard
from loopwarden.adapters.google_adk import LoopGuardPlugin


def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"It is 21C in {city}."


class StuckModel(BaseLlm):
    """Stands in for a real model (model="gemini-2.5-flash" in real code): the same call."""

    model: str = "stuck"

    async def generate_content_async(self, llm_request, stream=False):
        call = types.FunctionCall(name="get_weather", args={"city": "Paris"})
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


# stopAfterBlocks: end the run at the first blocked call instead of letting the model retry.
guard = LoopGuard(
    {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "stopAfterBlocks": 1}
)
agent = LlmAgent(name="weather", model=StuckModel(), tools=[get_weather])
runner = InMemoryRunner(app=App(name="demo", root_agent=agent, plugins=[LoopGuardPlugin(guard)]))


async def main():
    session = await runner.session_service.create_session(app_name="demo", user_id="me")
    question = types.Content(role="user", parts=[types.Part(text="What's the weather in Paris?")])
    async for event in runner.run_async(user_id="me", session_id=session.id, new_message=question):
        for part in event.content.parts if event.content else []:
            if part.function_response:  # what the model is shown for each call
                print(" tool:", *part.function_response.response.values())
            elif part.text:  # the run's last word, once loopwarden stopped it
                print("final:", part.text)


asyncio.run(main())
