"""What ``ShortTermMemorySession.agent()`` adds to an agent: a ``tool_use_behavior`` that
ends the run after a memory call that followed an answer, hooks that tell the session
what each model call is sent and what it said, and a wrapper of the agent's model that
sends the tools the session's turn offers.

Why a model wrapper: the SDK builds one tool list per step (``get_all_tools``, through
each tool's ``is_enabled``) and uses it twice, as the tools the model is sent *and* as
the tools a call can be routed to; a call to a tool not in it raises
``ModelBehaviorError`` unless the caller's ``RunConfig`` says otherwise. No hook sees
that list (``on_llm_start`` is handed the instructions and the input). So the memory
tool stays in every step's list of ``agent()``'s agent, and :class:`MemoryModel`, the
one place between that list and the request, leaves it out of what the model is sent
while the turn's guards hide it (``MemoryTurn.request_tools``): a call the model makes
anyway still reaches the turn, which answers it with the guard's failed result."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from stm_memory.kit import missing_extra

try:
    from agents import AgentHooks, Model, ModelSettings, ModelTracing, RunContextWrapper
    from agents.agent import ToolsToFinalOutputResult
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
    from agents.tool import FunctionToolResult, Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise missing_extra(
        "stm_memory_openai_agents", "the OpenAI Agents SDK", "openai-agents"
    ) from exc

from stm_memory import TOOL_NAME

__all__ = ["Epilogue", "MemoryHooks", "MemoryModel", "RunObserver"]


class RunObserver(Protocol):
    """What the hooks tell the session's open turn (the session implements it; the
    hooks hold it instead of reaching into the session's private state)."""

    @property
    def session(self) -> object:
        """The session observed (a plain agent's hooks are not this session's)."""
        ...

    def before_model(self, items: Any, run_input: Any) -> None:
        """Before each model call: the input as it will be sent (mutable), and the
        run's input as the SDK keeps it (``RunContextWrapper.turn_input``)."""

    def request_tools(
        self, tools: list[Tool], handoffs: Sequence[Any], items: Any, settings: ModelSettings
    ) -> tuple[list[Tool], ModelSettings]:
        """At each model call: the tools and settings the model is sent, from the
        step's tool list (the memory tool in it, routable) and its input."""

    def answered(self, text: str, agent: Any) -> None:
        """After each model call (by ``agent``): the visible text of the response."""

    def finish_after_memory(self, call_names: Sequence[str]) -> str | None:
        """The answer to end the run with after this step's calls, or None."""

    def finishing(self) -> None:
        """The step recorded next is the run's last."""

    async def text_call(self, text: str, sent: Any) -> list[Any] | None:
        """After a response with no tool calls (``text``, its visible text) to the input
        ``sent``: a memory call written as text runs as the turn's write; then the
        input to ask once more with, without the tool (None: ``text`` was an answer)."""


def _calls_tools(response: ModelResponse) -> bool:
    return any(getattr(item, "type", None) == "function_call" for item in response.output)


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
        self.observer.before_model(input_items, getattr(context, "turn_input", None))
        await self._forward("on_llm_start", context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        text = _response_text(response)
        if not _calls_tools(response):
            # A streamed reply that was our call as text (agent()'s model runs the
            # others, and asks again): still the write; this one answer stays its text.
            await self.observer.text_call(text, None)
        self.observer.answered(text, agent)
        await self._forward("on_llm_end", context, agent, response)


class MemoryModel(Model):
    """The model of :meth:`ShortTermMemorySession.agent`'s agent: the agent's own
    ``Model`` (``inner``), sent the tools the observer's turn offers (the module
    docstring says why). Everything else is the inner model's."""

    def __init__(self, observer: RunObserver, inner: Model) -> None:
        self.observer = observer
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # What the SDK reads off a model (its name, prompt-cache support …) is the inner
        # model's. Only called for names not found here; the two of ours never recurse.
        if name in ("inner", "observer"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"MemoryModel({self.inner!r})"

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **kwargs: Any,
    ) -> ModelResponse:
        async def ask(items: str | list[TResponseInputItem]) -> ModelResponse:
            # The tools and settings the turn offers for this input, then the call.
            sent, settings = self.observer.request_tools(tools, handoffs, items, model_settings)
            return await self.inner.get_response(
                system_instructions,
                items,
                settings,
                sent,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
                **kwargs,
            )

        response = await ask(input)
        if _calls_tools(response):
            return response
        again = await self.observer.text_call(_response_text(response), input)
        if again is None:
            return response
        # The reply was our tool's call written as text (run as the write): the user
        # gets an answer from one more call, without the tool; both calls are billed.
        answer = await ask(again)
        answer.usage.add(response.usage)
        return answer

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        tools, model_settings = self.observer.request_tools(tools, handoffs, input, model_settings)
        return self.inner.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
            **kwargs,
        )

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)
