"""One scripted multi-turn, multi-channel conversation through every loop, offline.

Run as a script (``python scripted_conversation.py OUT_DIR WORK_DIR``) by
``test_determinism.py``, twice, in fresh processes with different hash seeds, time
zones, working directories and wall-clock times. It writes to ``OUT_DIR``:

- ``openai_chat.yaml``, ``openai_responses.yaml``, ``anthropic.yaml``: vcrpy cassettes
  of every HTTP request the SDK clients sent (the offline model answers in-process
  through the clients' transport);
- ``requests.json``: every request body the loops built (``TurnResult.requests``), the
  LangChain middleware's prompts, and ``build_context`` output (content, nudge,
  depths, placement) for a set of scopes.

Same inputs and a frozen clock must give byte-identical files.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import openai
import vcr
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import Category, Scope, ShortTermMemory
from stm_memory.model.messages import message_text
from stm_memory.testing import (
    FrozenClock,
    OfflineChatModel,
    OfflineModel,
    offline_anthropic_client,
    offline_openai_client,
)
from stm_memory.wire.anthropic import system_placed
from stm_memory_anthropic import AnthropicLoop
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop

SYSTEM = "You are Quill, a co-writer for a fantasy novel."
LINES = {
    "plot": [
        "Chapter one: Mira steals a map from the archive in Vel Darun.",
        "The map leads to the drowned city of Ost. The Guild thought it lost.",
        "Her brother Tavin is caught by the archive guard while she escapes.",
        "Chapter two: she bargains with the smuggler Ketch for passage south.",
    ],
    "lore": [
        "Magic is ink-based: spells are written, and water smears them.",
        "The Guild controls all ink production and licenses every scribe.",
        "Archivists take a vow of silence, so Oren helping Tavin is huge.",
    ],
    "secret": [
        "Spoiler for the mods only: Ketch is Mira's father.",
        "Keep the twist out of the public channels.",
    ],
}


def _scopes() -> dict[str, Scope]:
    def server(channel: str, user: str) -> Scope:
        return Scope(
            channel_id=channel,
            user_id=user,
            server_id="guild",
            channel_name=channel,
            server_name="Writers' Guild",
            user_name=user.title(),
        )

    return {
        "plot": server("plot", "ann"),
        "lore": server("lore", "ben"),
        "secret": server("secret", "ann"),
        "dm": Scope(channel_id="dm-ann", user_id="ann", user_name="Ann"),
        "other": Scope(
            channel_id="general",
            user_id="ann",
            server_id="book-club",
            channel_name="general",
            server_name="Book Club",
            user_name="Ann",
        ),
    }


def _memory(work: Path, clock: FrozenClock) -> ShortTermMemory:
    memory = ShortTermMemory.from_url(
        f"sqlite:///{work / 'stm.db'}", cache_dir=work / "cache", clock=clock
    )
    # Category mode with privacy in one server, summary mode in the other.
    memory.set_categories(
        "guild",
        [
            Category("Plot so far", "What happened in the story"),
            Category("Open threads", "Questions still to settle"),
            Category("Mood", "The tone of the discussion"),
        ],
    )
    memory.configure_server(
        "guild", refresh_cadence=2, private_channel_ids=["secret", "vault", "archive"]
    )
    memory.configure_server("book-club", refresh_cadence=2, render_mode="supersede")
    memory.configure_user("ann", cross_server_opt_in=True)
    return memory


def _vcr() -> vcr.VCR:
    def scrub(request: Any) -> Any:
        for name in list(request.headers):
            if name.lower().startswith("x-stainless-") or name.lower() == "user-agent":
                del request.headers[name]
        return request

    return vcr.VCR(
        record_mode="all",
        match_on=["method", "path", "body"],
        filter_headers=["authorization", "x-api-key"],
        before_record_request=scrub,
        decode_compressed_response=True,
    )


def _conversation(
    run_turn: Callable[[Scope, list[Any]], Any],
    scopes: Mapping[str, Scope],
    order: list[tuple[str, str]],
    clock: FrozenClock,
) -> list[dict[str, Any]]:
    """Drive ``order`` ((scope name, line key)); returns every request body sent."""
    history: dict[str, list[Any]] = {}
    cursor: dict[str, int] = {}
    requests: list[dict[str, Any]] = []
    for name, lines in order:
        clock.advance(minutes=7)
        index = cursor.get(lines, 0)
        cursor[lines] = index + 1
        text = LINES[lines][index % len(LINES[lines])]
        message = {"role": "user", "content": text}
        past = history.setdefault(name, [])
        result = run_turn(scopes[name], [*past[-4:], message])
        past += [message, {"role": "assistant", "content": result.text}]
        requests += result.requests
    return requests


# -- an offline Responses API (the offline clients speak Chat Completions and Messages) --


def _responses_dialogue(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if body.get("instructions"):
        out.append(("system", str(body["instructions"])))
    for item in body.get("input") or ():
        if "role" in item:
            role = "system" if item["role"] == "developer" else str(item["role"])
            out.append((role, message_text(item.get("content"))))
        elif item.get("type") == "function_call_output":
            out.append(("tool", str(item.get("output", ""))))
    return out


def _responses_body(model: OfflineModel, body: Mapping[str, Any]) -> dict[str, Any]:
    tools = {t["name"]: t.get("parameters") or {} for t in body.get("tools") or ()}
    reply = model.respond(_responses_dialogue(body), tools=tools)
    n = model.calls
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_offline_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_offline_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": json.dumps(args, ensure_ascii=False),
                "status": "completed",
            }
        )
    return {
        "id": f"resp_offline_{n}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model", "offline"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20},
    }


def _offline_responses_client(model: OfflineModel) -> openai.OpenAI:
    def handle(request: Any) -> Any:
        return httpx2.Response(200, json=_responses_body(model, json.loads(request.content)))

    return openai.OpenAI(
        api_key="offline",
        base_url="http://offline.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
    )


# -- LangChain ---------------------------------------------------------------------------


def _wire(message: BaseMessage) -> dict[str, Any]:
    """What a provider binding sends of a message (LangGraph's random ids are not sent)."""
    out: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def _langchain(memory: ShortTermMemory, clock: FrozenClock) -> list[list[dict[str, Any]]]:
    model = OfflineChatModel()
    agent = create_agent(
        model,
        tools=[],
        system_prompt=SYSTEM,
        middleware=[ShortTermMemoryMiddleware(memory)],
        checkpointer=InMemorySaver(),
    )
    context = {"user_id": "ben", "server_id": "guild", "channel_id": "worldbuilding"}
    config: RunnableConfig = {"configurable": {"thread_id": "worldbuilding"}}
    for text in LINES["lore"]:
        clock.advance(minutes=5)
        inputs: Any = {"messages": [("user", text)]}
        agent.invoke(inputs, config, context=context)
    return [[_wire(m) for m in prompt] for prompt in model.prompts]


# -- build_context ----------------------------------------------------------------------


def _contexts(memory: ShortTermMemory, scopes: Mapping[str, Scope]) -> list[dict[str, Any]]:
    dialogue = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    out = []
    for name in sorted(scopes):
        turn = memory.begin_turn(scopes[name], provider="openai")
        context = memory.build_context(turn)
        out.append(
            {
                "scope": name,
                "content": context.content,
                "nudge": context.nudge,
                "content_depth": context.content_depth,
                "nudge_depth": context.nudge_depth,
                "applied": context.apply(dialogue, provider="openai"),
                "applied_anthropic": list(system_placed(context, dialogue[1:], SYSTEM)),
            }
        )
    return out


def main(out: Path, work: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    clock = FrozenClock()
    scopes = _scopes()
    recorder = _vcr()
    captured: dict[str, Any] = {}
    with _memory(work, clock) as memory:
        chat = OpenAIChatLoop(offline_openai_client(OfflineModel()), memory, model="offline")
        order = [("plot", "plot"), ("lore", "lore"), ("secret", "secret")] * 3
        order += [("dm", "plot"), ("dm", "lore"), ("plot", "plot")]
        with recorder.use_cassette(str(out / "openai_chat.yaml")):
            captured["openai_chat"] = _conversation(
                lambda s, m: chat.run_turn(s, m, system=SYSTEM), scopes, order, clock
            )

        claude = AnthropicLoop(offline_anthropic_client(OfflineModel()), memory, model="offline")
        order = [("other", "plot"), ("other", "lore"), ("other", "plot"), ("plot", "lore")]
        with recorder.use_cassette(str(out / "anthropic.yaml")):
            captured["anthropic"] = _conversation(
                lambda s, m: claude.run_turn(s, m, system=SYSTEM), scopes, order, clock
            )

        responses = OpenAIResponsesLoop(
            _offline_responses_client(OfflineModel()), memory, model="offline"
        )
        order = [("lore", "lore"), ("plot", "plot"), ("lore", "lore"), ("lore", "plot")]
        with recorder.use_cassette(str(out / "openai_responses.yaml")):
            captured["openai_responses"] = _conversation(
                lambda s, m: responses.run_turn(s, m, system=SYSTEM), scopes, order, clock
            )

        captured["langchain"] = _langchain(memory, clock)
        clock.advance(timedelta(hours=3))
        captured["contexts"] = _contexts(memory, scopes)
    (out / "requests.json").write_text(
        json.dumps(captured, ensure_ascii=False, indent=1), encoding="utf-8"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
