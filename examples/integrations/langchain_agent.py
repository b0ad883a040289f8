"""LangChain v1 + loopwarden: an agent whose model keeps making the same tool call.

pip install '.[langchain]' && python examples/integrations/langchain_agent.py
"""

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from loopwarden import LoopGuard
from loopwarden.adapters.langchain import LoopGuardMiddleware


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"It is 21C in {city}."


class ScriptedModel(GenericFakeChatModel):
    """Stands in for a real chat model (use init_chat_model(...) in real code)."""

    def bind_tools(self, tools, **kwargs):
        return self


# A model stuck in a loop: the same call with the same arguments, 20 times over.
stuck = (
    AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": f"c{i}"}])
    for i in range(20)
)

# stopAfterBlocks: end the run at the first blocked call instead of letting the model retry.
guard = LoopGuard(
    {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "stopAfterBlocks": 1}
)
agent = create_agent(
    ScriptedModel(messages=stuck),
    [get_weather],
    middleware=[LoopGuardMiddleware(guard)],
    checkpointer=InMemorySaver(),
)

result = agent.invoke(
    {"messages": [{"role": "user", "content": "What's the weather in Paris?"}]},
    {"configurable": {"thread_id": "demo-thread"}},
)
for message in result["messages"]:
    if message.text:
        print(f"{message.type:>5}: {message.text}")
