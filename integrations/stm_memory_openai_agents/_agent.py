"""What ``ShortTermMemorySession.agent()`` adds to an agent: a ``tool_use_behavior`` that
ends the run after a memory call that followed an answer, and hooks that tell the
session what each model call is sent and what it said."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from stm_memory.kit import missing_extra

try:
    from agents import AgentHooks, RunContextWrapper
    from agents.agent import ToolsToFinalOutputResult
    from agents.items import ModelResponse
    from agents.tool import FunctionToolResult, Tool
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise missing_extra(
        "stm_memory_openai_agents", "the OpenAI Agents SDK", "openai-agents"
    ) from exc

from stm_memory import TOOL_NAME

__all__ = ["Epilogue", "MemoryHooks", "RunObserver"]


class RunObserver(Protocol):
    """What the hooks tell the session's open turn (the session implements it; the
    hooks hold it instead of reaching into the session's private state)."""

    @property
    def session(self) -> object:
        """The session observed (a plain agent's hooks are not this session's)."""
        ...

    def before_model(self, items: Any) -> None:
        """Before each model call: the input as it will be sent (mutable)."""

    def answered(self, text: str) -> None:
        """After each model call: the visible text of the response."""

    def finish_after_memory(self, call_names: Sequence[str]) -> str | None:
        """The answer to end the run with after this step's calls, or None."""

    def finishing(self) -> None:
        """The step recorded next is the run's last."""


def _response_text(response: ModelResponse) -> str:
    parts: list[str] = []
    for item in response.output:
        if getattr(item, "type", None) != "message":
            continue
        for part in getattr(item, "content", None) or []:
            if getattr(part, "type", None) == "output_text":
                parts.append(str(getattr(part, "text", "") or ""))
    return "".join(parts)


class Epilogue:
    """``tool_use_behavior`` of :meth:`ShortTermMemorySession.agent`: a step whose only
    tool calls were the memory tool, after a response that already answered, is the
    run's last (its answer the final output); everything else goes to the agent's
    own behaviour, without the memory results (never a final output themselves)."""

    def __init__(self, observer: RunObserver, inner: Any, output_type: Any) -> None:
        self.observer = observer
        self.inner = inner
        self.text_output = output_type is None or output_type is str

    async def __call__(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        theirs = [r for r in results if r.tool.name != TOOL_NAME]
        if self.text_output:
            answer = self.observer.finish_after_memory([r.tool.name for r in results])
            if answer is not None:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=answer)
        outcome = await _delegate(self.inner, context, theirs)
        if outcome.is_final_output:  # the step being saved next is the run's last
            self.observer.finishing()
        return outcome


async def _delegate(
    behavior: Any, context: RunContextWrapper[Any], results: Sequence[FunctionToolResult]
) -> ToolsToFinalOutputResult:
    """The SDK's ``tool_use_behavior`` semantics for the agent's own setting."""
    if not results or behavior == "run_llm_again":
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    if behavior == "stop_on_first_tool":
        return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output)
    if isinstance(behavior, Mapping):
        names = behavior.get("stop_at_tool_names", [])
        for result in results:
            if result.tool.name in names or result.tool.qualified_name in names:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=result.output)
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    if callable(behavior):
        outcome = behavior(context, list(results))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if isinstance(outcome, ToolsToFinalOutputResult):
            return outcome
    return ToolsToFinalOutputResult(is_final_output=False, final_output=None)


class MemoryHooks(AgentHooks[Any]):
    """The agent's own hooks, plus: before each model call, the turn's user message
    from the input and the nudge taken out once the tool is gone; after it, the text
    of the response (for the epilogue)."""

    def __init__(self, observer: RunObserver, inner: Any) -> None:
        self.observer = observer
        self.inner = inner

    async def _forward(self, name: str, *args: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args)

    async def on_start(self, context: Any, agent: Any) -> None:
        await self._forward("on_start", context, agent)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        await self._forward("on_end", context, agent, output)

    async def on_handoff(self, context: Any, agent: Any, source: Any) -> None:
        await self._forward("on_handoff", context, agent, source)

    async def on_tool_start(self, context: Any, agent: Any, tool: Tool) -> None:
        await self._forward("on_tool_start", context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Tool, result: Any) -> None:
        await self._forward("on_tool_end", context, agent, tool, result)

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: Any, input_items: Any
    ) -> None:
        self.observer.before_model(input_items)
        await self._forward("on_llm_start", context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        self.observer.answered(_response_text(response))
        await self._forward("on_llm_end", context, agent, response)
