"""``ShortTermMemoryBuffer``: the classic ``BaseMemory`` adapter for chains.

A classic chain calls ``load_memory_variables`` before the model and ``save_context``
after it; here they begin and end one memory turn:

- ``load_memory_variables`` begins the turn (the input text feeds the long-term-intent
  guard) and returns the rendered memory *content* under ``memory_key``: this
  channel's distilled memory and the recent memory of the user's other channels. A
  chain cannot call tools, so there is no nudge.
- ``save_context`` captures the exchange after the channel's recent stored messages
  (the engine keeps the last turns) and ends the turn, which counts towards the
  server's refresh cadence, so an agent in the same channel is nudged in time.
- ``clear`` forgets the channel (the "/refresh" command).

Both are translations onto :class:`~stm_memory.kit.MemoryTurn`: the load is
``begin`` and ``assemble`` (the content only: a chain places nothing itself), the save
``finish`` (the stored messages, with their speakers, go in front of the exchange), and
a load whose save never came is ``abandon`` when the next one begins.

The buffer holds no raw transcript in the prompt: pair it with a window memory
(``CombinedMemory``) when the chain also needs the verbatim last exchanges. One buffer
serves one conversation (its ``scope``), like every classic memory.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, PrivateAttr

from stm_memory.kit import missing_extra

try:
    from langchain_classic.base_memory import BaseMemory
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ShortTermMemoryBuffer", "langchain-classic", "classic") from exc

from stm_memory import Scope, ShortTermMemory, ValidationError
from stm_memory.kit import MemoryTurn, TurnOptions, drive, text_of

__all__ = ["ShortTermMemoryBuffer"]

_OUTPUT_KEYS = ("text", "output", "response", "answer", "result")


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "content"):  # a message from a chat model chain
        return text_of(value)
    return "" if value is None else str(value)


class ShortTermMemoryBuffer(BaseMemory):
    """Short-term memory for classic chains (``LLMChain``, ``ConversationChain`` …).

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory`.
        scope: the conversation this buffer serves.
        memory_key: the prompt variable that receives the memory text.
        input_key: the input holding the user's message (default: the only input that
            is not a memory variable, else ``input``).
        output_key: the output holding the answer (default: the only output, else
            ``text``/``output``/``response``/``answer``/``result``).
        provider: provider name for the engine's provider exclusion (the buffer's one
            option of a turn: see :attr:`options`).
    """

    memory: ShortTermMemory
    scope: Scope
    memory_key: str = "stm_memory"
    input_key: str | None = None
    output_key: str | None = None
    provider: str | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _turn: MemoryTurn | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Checked once the fields are, and outside pydantic's validation, so a wrong
        # provider is the ConfigurationError every entry point raises (not a pydantic
        # error), when the buffer is built rather than in the middle of a chain.
        self.options  # noqa: B018

    @property
    def options(self) -> TurnOptions:
        """What this buffer's turns begin with (built from ``provider``, checked as every
        entry point's options are)."""
        return TurnOptions.given(self.memory, provider=self.provider)

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Begin the turn and return ``{memory_key: content}`` ("" when there is none)."""
        turn = self._begin(_as_text(inputs.get(self._input_key(inputs))))
        if not turn.status.active:  # could not begin: no memory this time
            return {self.memory_key: ""}
        stale = self._swap(turn)
        if stale is not None:  # a load without its save (the chain failed): it happened
            drive(stale.abandon())
        # A buffer's chain sends no dialogue of ours to hold: the newest memory shows.
        drive(turn.assemble(dialogue=False))
        return {self.memory_key: turn.status.context.content or ""}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Capture this exchange after the stored recent messages and end the turn."""
        user_text = _as_text(inputs.get(self._input_key(inputs)))
        answer = _as_text(outputs.get(self._output_key(outputs)))
        # A save without a load is still one turn of this conversation.
        turn = self._swap(None) or self._begin(user_text)
        exchange = [
            {
                "role": "user",
                "content": user_text,
                "name": self.scope.user_name,
                "user_id": self.scope.user_id,
            },
            {"role": "assistant", "content": answer},
        ]
        # Only this exchange is the buffer's: the stored messages go in front of it,
        # keeping their speakers (an erasure must find each one's words).
        drive(turn.finish(exchange, start=0))

    def clear(self) -> None:
        """Forget this channel's memory everywhere (cache, database, outbox)."""
        self._swap(None)
        self.memory.clear_channel(self.scope.channel_id)

    # -- helpers ---------------------------------------------------------------------------

    def _begin(self, user_text: str) -> MemoryTurn:
        return drive(
            MemoryTurn.begin(self.memory, self.scope, options=self.options, user_message=user_text)
        )

    def _swap(self, turn: MemoryTurn | None) -> MemoryTurn | None:
        with self._lock:
            old, self._turn = self._turn, turn
        return old

    def _input_key(self, inputs: Mapping[str, Any]) -> str:
        if self.input_key is not None:
            return self.input_key
        keys = [k for k in inputs if k not in (self.memory_key, "stop")]
        if len(keys) == 1:
            return keys[0]
        if "input" in keys:
            return "input"
        raise ValidationError(
            f"cannot tell which of the inputs {sorted(keys)} is the user's message; "
            "set ShortTermMemoryBuffer(input_key=...)"
        )

    def _output_key(self, outputs: Mapping[str, Any]) -> str:
        if self.output_key is not None:
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        for key in _OUTPUT_KEYS:
            if key in outputs:
                return key
        raise ValidationError(
            f"cannot tell which of the outputs {sorted(outputs)} is the answer; "
            "set ShortTermMemoryBuffer(output_key=...)"
        )
