"""The model under evaluation, in the forms each strategy needs.

A user names one model: a LangChain chat model, an ``init_chat_model`` string such as
``"openai:gpt-4.1-mini"``, an ``openai.OpenAI`` / ``anthropic.Anthropic`` client (with
``model_name``), or a scripted model (``"scripted:perfect"``, :func:`scripted`). It is
resolved once into a :class:`ResolvedModel`: a LangChain chat model for the LangChain
strategies and a client for our provider loops, whichever of the two can be had.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation._conversation import ConversationSet
from stm_memory.evaluation._recording import chat_body, output_tokens_of
from stm_memory.evaluation._scripted import SCRIPTED_KINDS, ScriptedKind, ScriptedModel

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from stm_memory.engine import ShortTermMemory

__all__ = ["Provider", "ResolvedModel", "ScriptedSpec", "resolve_model", "scripted"]

Provider = Literal["openai", "anthropic", "other"]
#: The ``model`` field of a scripted run's request bodies.
SCRIPTED_MODEL_NAME = "offline"


@dataclass(frozen=True, slots=True)
class ScriptedSpec:
    """A scripted model of known quality (see :mod:`stm_memory.evaluation._scripted`)."""

    kind: ScriptedKind = "perfect"

    def __post_init__(self) -> None:
        if self.kind not in SCRIPTED_KINDS:
            raise ConfigurationError(f"scripted kind must be one of {SCRIPTED_KINDS}")


def scripted(kind: ScriptedKind = "perfect") -> ScriptedSpec:
    """A scripted model: ``"perfect"``, ``"forgetful"``, ``"paraphrase"``, ``"recent"`` or
    ``"toolless"`` (:mod:`stm_memory.evaluation._scripted`)."""
    return ScriptedSpec(kind)


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """One model, as every strategy can use it. The factories build a fresh object
    per strategy (a scripted model counts its own calls)."""

    label: str
    provider: Provider
    model_name: str
    scripted: ScriptedKind | None
    chat_factory: Callable[[ConversationSet], BaseChatModel] | None
    loop_factory: Callable[..., Any] | None

    def chat(self, conversation: ConversationSet) -> BaseChatModel | None:
        return self.chat_factory(conversation) if self.chat_factory else None

    def loop(
        self, conversation: ConversationSet, memory: ShortTermMemory, **request_options: Any
    ) -> Any:
        """Our loop over this model; ``request_options`` go into its requests."""
        if self.loop_factory is None:
            return None
        return self.loop_factory(conversation, memory, **request_options)


def _scripted_chat_class() -> type[Any]:
    from langchain_core.language_models import LangSmithParams
    from langchain_core.outputs import ChatResult

    from stm_memory.model.rates import model_profile
    from stm_memory.testing.chat_model import OfflineChatModel
    from stm_memory.testing.prompt_cache import CACHE_PROFILES, PromptCache

    class ScriptedChatModel(OfflineChatModel):
        """The offline chat model that reports usage as a provider would: its input
        split by a prompt cache of its own (requests back to back), its output."""

        #: The model it stands in for, as ChatOpenAI names its model: "offline", or
        #: an OpenAI model's name (its requests are then written as that model's, cache
        #: breakpoints included where it takes them).
        model_name: str = SCRIPTED_MODEL_NAME
        # Not "cache": BaseChatModel.cache is LangChain's response cache.
        prompt_cache: Any = None

        def model_post_init(self, context: Any, /) -> None:
            super().model_post_init(context)
            if self.prompt_cache is None:
                profile = model_profile(self.model_name) or CACHE_PROFILES["openai-gpt-5"]
                self.prompt_cache = PromptCache(profile)

        @property
        def _llm_type(self) -> str:
            return "stm-scripted"

        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
            # Its provider, as tracing and stm-memory read it: standing in for a named
            # OpenAI model, OpenAI (its requests are written for that model, cache hints
            # and breakpoints included); "offline" is priced as gpt-5 (the profile of
            # its own prompt cache), see stm_memory.model.rates.
            params = super()._get_ls_params(stop=stop, **kwargs)
            profile = model_profile(self.model_name)
            named = profile is not None and profile.provider == "openai"
            params["ls_provider"] = "openai" if named else "stm-scripted"
            return params

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            result = super()._generate(messages, stop, run_manager, **kwargs)
            message = result.generations[0].message
            usage = self.prompt_cache.observe(
                chat_body(self.model_name, messages, kwargs.get("tools") or ()),
                api="openai_chat",
            )
            calls = getattr(message, "tool_calls", [])
            out = output_tokens_of(message.text, [c["args"] for c in calls])
            message.usage_metadata = {  # type: ignore[attr-defined]
                "input_tokens": usage.input_tokens,
                "output_tokens": out,
                "total_tokens": usage.input_tokens + out,
                "input_token_details": {"cache_read": usage.cached_tokens},
            }
            return result

    return ScriptedChatModel


def _resolve_scripted(kind: ScriptedKind, name: str = SCRIPTED_MODEL_NAME) -> ResolvedModel:
    chat_class = _scripted_chat_class()

    def chat(conversation: ConversationSet) -> BaseChatModel:
        model: BaseChatModel = chat_class(
            model=ScriptedModel(conversation=conversation, kind=kind), model_name=name
        )
        return model

    def loop(conversation: ConversationSet, memory: ShortTermMemory, **options: Any) -> Any:
        from stm_memory.testing.clients import offline_openai_client
        from stm_memory_openai import OpenAIChatLoop

        client = offline_openai_client(ScriptedModel(conversation=conversation, kind=kind))
        return OpenAIChatLoop(client, memory, model=name, **options)

    return ResolvedModel(f"scripted:{kind}", "openai", name, kind, chat, loop)


def _openai_loop(client: Any, name: str) -> Callable[[ConversationSet, Any], Any]:
    def loop(conversation: ConversationSet, memory: ShortTermMemory, **options: Any) -> Any:
        from stm_memory_openai import OpenAIChatLoop

        return OpenAIChatLoop(client, memory, model=name, **options)

    return loop


def _anthropic_loop(client: Any, name: str) -> Callable[[ConversationSet, Any], Any]:
    def loop(conversation: ConversationSet, memory: ShortTermMemory, **options: Any) -> Any:
        from stm_memory_anthropic import AnthropicLoop

        return AnthropicLoop(client, memory, model=name, max_tokens=512, **options)

    return loop


def _kind_of_client(obj: Any) -> Provider | None:
    module = type(obj).__module__.split(".")[0]
    if module == "openai" and hasattr(obj, "chat"):
        return "openai"
    if module == "anthropic" and hasattr(obj, "messages"):
        return "anthropic"
    return None


def _from_chat_model(model: BaseChatModel, label: str | None = None) -> ResolvedModel:
    cls = type(model).__name__
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or cls)
    provider: Provider = "other"
    loop = None
    if cls in ("ChatOpenAI", "AzureChatOpenAI") and getattr(model, "root_client", None):
        provider, loop = "openai", _openai_loop(model.root_client, name)  # type: ignore[attr-defined]
    elif cls == "ChatAnthropic":
        provider, loop = "anthropic", _anthropic_loop(model._client, name)  # type: ignore[attr-defined]
    return ResolvedModel(label or f"{cls}({name})", provider, name, None, lambda _: model, loop)


def _from_client(client: Any, provider: Provider, name: str | None) -> ResolvedModel:
    if not name:
        raise ConfigurationError("a client needs model_name= (the model to call)")
    chat: BaseChatModel | None = None
    if provider == "openai":
        loop = _openai_loop(client, name)
        try:
            from langchain_openai import ChatOpenAI

            # The same client (and so its transport) serves the LangChain strategies.
            chat = ChatOpenAI(
                model=name,
                api_key=client.api_key,
                client=client.chat.completions,
                root_client=client,
            )
        except ImportError:
            chat = None
    else:
        loop = _anthropic_loop(client, name)
        try:
            from langchain_anthropic import ChatAnthropic

            # ChatAnthropic builds its own client: the key and base URL are carried over.
            chat = ChatAnthropic(  # type: ignore[call-arg]
                model=name, api_key=client.api_key, base_url=str(client.base_url)
            )
        except ImportError:
            chat = None
    label = f"{provider}:{name}"
    return ResolvedModel(label, provider, name, None, (lambda _: chat) if chat else None, loop)


def resolve_model(model: Any, *, model_name: str | None = None) -> ResolvedModel:
    """``model`` in the forms the strategies need (see the module docstring)."""
    if isinstance(model, ResolvedModel):
        return model
    # A scripted model names itself "offline" on the wire, or ``model_name`` (a model
    # whose requests it stands in for).
    scripted_as = model_name or SCRIPTED_MODEL_NAME
    if isinstance(model, ScriptedSpec):
        return _resolve_scripted(model.kind, scripted_as)
    if isinstance(model, str):
        if model == "offline" or model.startswith("scripted"):
            kind = model.partition(":")[2] or "perfect"
            return _resolve_scripted(ScriptedSpec(kind).kind, scripted_as)  # type: ignore[arg-type]
        from langchain.chat_models import init_chat_model

        resolved = _from_chat_model(init_chat_model(model), label=model)
        return resolved
    provider = _kind_of_client(model)
    if provider is not None:
        return _from_client(model, provider, model_name)
    from langchain_core.language_models import BaseChatModel

    if isinstance(model, BaseChatModel):
        return _from_chat_model(model)
    raise ConfigurationError(
        "model must be a LangChain chat model, an init_chat_model string such as "
        f"'openai:gpt-4.1-mini', an OpenAI or Anthropic client, or 'scripted:perfect'; "
        f"got {type(model).__name__}"
    )
