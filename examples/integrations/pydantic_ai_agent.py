"""PydanticAI + loopwarden: an agent whose model keeps making the same tool call.

pip install '.[pydantic-ai]' && python examples/integrations/pydantic_ai_agent.py
"""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from loopwarden import LoopGuard
from loopwarden.adapters.pydantic_ai import LoopGuardCapability


def stuck_model(messages, info):
    """Stands in for a real model ('openai:gpt-5.2', ...): the same call until it is refused."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            print(f" tool ({part.outcome}): {part.model_response_str()}")
            if part.outcome == "failed":
                return ModelResponse(parts=[TextPart("I could not get the weather.")])
    return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"})])


guard = LoopGuard({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5})
agent = Agent(FunctionModel(stuck_model), capabilities=[LoopGuardCapability(guard)])


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"It is 21C in {city}."


result = agent.run_sync("What's the weather in Paris?")
print("answer:", result.output)
