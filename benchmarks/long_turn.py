"""Case 12 — long turns (issue "long turns").

One ``create_agent`` turn in which the model reads forty reports of ~1,800 tokens each
(72k read in all) before it answers, on an OpenAI-compatible server with a 32,768-token
window (vLLM's listing; past the window, vLLM's 400), then a second turn asking for the
code in the first report. Four agents, in one run, through ``ChatOpenAI`` and a local
stand-in server (no model, no network):

- **none**: the agent alone;
- **clear**: LangChain's ``ContextEditingMiddleware(ClearToolUsesEdit(trigger=20000,
  keep=3))``;
- **summarize**: LangChain's ``SummarizationMiddleware(trigger=("tokens", 20000),
  keep=("messages", 6))``, its summaries written by the same model (extra calls, billed);
- **ours**: ``ShortTermMemoryMiddleware`` with its defaults (the window it is not told).

The stand-in model reads the next report no request mentions (a report a summary or a
clear no longer names is read again; a summary lists every report in what it was
given), answers once all are read, and for the second
turn answers from a request that holds the code, else calls a tool other than the
reader and the memory tool that takes one required string (the retrieval tool) with
the first read's call id when a request names it (a placeholder, the index of results
the history cut left out), else says it no longer has it. Per agent: completed (no
error reached the caller, no recursion limit), the largest request as a share of the
window, the requests' bill as the project's prompt-cache model prices it with
OpenAI's cache held between turns (a repeated prefix from 1,024 tokens in 128-token
steps at 0.1x, the rest at 1x), and whether the second turn was answered.

``long_turn_bill_vs_cheapest_peer`` is ours over the cheapest peer that completed the
first turn (target ≤ 0.8); ``long_turn_largest_share`` ≤ 0.75; completion and the
answer must hold. The full run adds 200 reads at a 131,072-token window.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ._harness import CaseResult, Config, Metric

NAME = "long_turn"
MODEL = "served-model"
TOOL = "open_report"
SYSTEM = "You are a research assistant. Read what you are asked to, then answer."


def code(k: int) -> str:
    return f"{(k * 104729) % 1000000:06d}-D{k}"


def report(k: int, tokens: int) -> str:
    """About ``tokens`` tokens; report k holds its code in its middle."""
    lines = [
        f"Section {i} of report {k}: the committee reviewed item {i * k} and deferred it."
        for i in range(max(2, tokens * 4 // 80))
    ]
    lines.insert(len(lines) // 2, f"CODE_{k} = {code(k)}")
    return "\n".join(lines)


class _Server:
    """The stand-in: vLLM's ``/v1/models`` and 400, the stand-in model's replies."""

    def __init__(self, reads: int, window: int) -> None:
        self.reads, self.window = reads, window
        self.bodies: list[dict[str, Any]] = []
        self.refused = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                entry = {"id": MODEL, "object": "model", "max_model_len": server.window}
                if self.path.rstrip("/").endswith("/models"):
                    self.send(200, {"object": "list", "data": [entry]})
                else:
                    self.send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                tokens = -(-len(json.dumps(body)) // 4)
                if tokens > server.window:
                    server.refused += 1
                    message = (
                        f"This model's maximum context length is {server.window} tokens. "
                        f"However, you requested {tokens} tokens in the messages. "
                        "Please reduce the length of the messages."
                    )
                    error = {"object": "error", "message": message, "type": "BadRequestError"}
                    self.send(400, {**error, "param": None, "code": 400})
                    return
                server.bodies.append(body)
                self.send(200, server.reply(body, tokens))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def reply(self, body: dict[str, Any], tokens: int) -> dict[str, Any]:
        messages = body.get("messages") or []
        text = json.dumps(messages)
        last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        asked = str(last.get("content") or "")
        if not body.get("tools"):  # the summarizer's request: it lists what it was given
            read = sorted({int(x) for x in re.findall(r"report_(\d+)", text)})
            return _say("Read so far: " + ", ".join(f"report_{k}" for k in read) + ".", tokens)
        if "first report" not in asked:
            done = {int(x) for x in re.findall(r"report_(\d+)", text)}
            todo = next((k for k in range(self.reads) if k not in done), None)
            if todo is None:
                return _say(f"All {self.reads} reports are read.", tokens)
            return _call(TOOL, {"name": f"report_{todo}"}, f"call_{todo}", tokens)
        if code(0) in text:
            return _say(f"The code is {code(0)}.", tokens)
        for t in body.get("tools") or []:
            function = t.get("function") or {}
            required = (function.get("parameters") or {}).get("required") or []
            if (
                (
                    function.get("name") not in (TOOL, "update_short_term_memory")
                    and len(required) == 1
                )
                and "call_back" not in text
                and re.search(r"\bcall_0\b", text)
            ):
                # The first read's id, as a placeholder or the index names it.
                return _call(function["name"], {required[0]: "call_0"}, "call_back", tokens)
        return _say("I no longer have it.", tokens)


def _usage(tokens: int) -> dict[str, int]:
    return {"prompt_tokens": tokens, "completion_tokens": 10, "total_tokens": tokens + 10}


def _say(text: str, tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [choice], "usage": _usage(tokens)}  # fmt: skip


def _call(name: str, args: dict[str, Any], call_id: str, tokens: int) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(args)}
    calls = [{"id": call_id, "type": "function", "function": function}]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [choice], "usage": _usage(tokens)}  # fmt: skip


def warm_bill(bodies: list[dict[str, Any]]) -> float:
    """Input units as the project's prompt-cache model prices the requests with
    OpenAI's cache held between turns (a repeated prefix from 1,024 tokens in 128-token
    steps at 0.1x, the rest at 1x)."""
    from stm_memory.testing.prompt_cache import CACHE_PROFILES, PromptCache

    warm = CACHE_PROFILES["openai-gpt-5-24h"]
    cache = PromptCache(warm)
    return sum(cache.observe(body, api="openai_chat").cost(warm) for body in bodies)


@dataclass(frozen=True)
class Outcome:
    completed: bool
    answered: bool
    largest_share: float
    bill: float
    requests: int
    refused: int


def run_agent(kind: str, reads: int, window: int, doc_tokens: int, root: Path) -> Outcome:
    from langchain.agents import create_agent
    from langchain.agents.middleware import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver
    from pydantic import SecretStr

    from stm_memory import ShortTermMemory
    from stm_memory_langchain import ShortTermMemoryMiddleware

    server = _Server(reads, window)
    chat = ChatOpenAI(model=MODEL, base_url=server.url, api_key=SecretStr("none"), max_retries=0)

    @tool
    def open_report(name: str) -> str:
        """Open a report by name."""
        return report(int(name.split("_")[1]), doc_tokens)

    memory = None
    middleware: list[Any] = []
    if kind == "clear":
        middleware = [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=20000, keep=3)])]
    elif kind == "summarize":
        middleware = [
            SummarizationMiddleware(model=chat, trigger=("tokens", 20000), keep=("messages", 6))
        ]
    elif kind == "ours":
        memory = ShortTermMemory.from_url(f"sqlite:///{root}/stm.db", cache_dir=str(root / "cache"))
        middleware = [ShortTermMemoryMiddleware(memory)]
    agent: Any = create_agent(
        chat, tools=[open_report], system_prompt=SYSTEM, middleware=middleware,
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    config: Any = {
        "configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"},
        "recursion_limit": 4 * reads + 20,
    }
    completed = answered = False
    try:
        agent.invoke(
            {"messages": [{"role": "user", "content": f"Read all {reads} reports."}]}, config
        )
        completed = True
        ask = "What is the code in the first report you read (CODE_0)?"
        state = agent.invoke({"messages": [{"role": "user", "content": ask}]}, config)
        answered = code(0) in str(state["messages"][-1].content)
    except Exception:  # a 400, or LangGraph's recursion limit: not completed
        pass
    finally:
        server.http.shutdown()
        if memory is not None:
            memory.close()
    largest = max((-(-len(json.dumps(b)) // 4) for b in server.bodies), default=0)
    return Outcome(
        completed,
        answered,
        largest / window,
        warm_bill(server.bodies),
        len(server.bodies),
        server.refused,
    )


def scenario(
    reads: int, window: int, doc_tokens: int, tag: str
) -> tuple[list[Metric], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = {
            kind: run_agent(kind, reads, window, doc_tokens, Path(tmp) / kind)
            for kind in ("none", "clear", "summarize", "ours")
        }
    ours = outcomes["ours"]
    peers = [o for k, o in outcomes.items() if k != "ours" and o.completed]
    cheapest = min((o.bill for o in peers), default=float("nan"))
    metrics = [
        Metric(f"long_turn{tag}_completed", float(ours.completed), "==", 1),
        Metric(f"long_turn{tag}_first_result_answered", float(ours.answered), "==", 1),
        Metric(f"long_turn{tag}_largest_share", round(ours.largest_share, 3), "<=", 0.75),
        Metric(f"long_turn{tag}_bill_vs_cheapest_peer", round(ours.bill / cheapest, 3), "<=", 0.8),
        Metric(f"long_turn{tag}_bill_units", round(ours.bill)),
    ]
    for kind, o in outcomes.items():
        if kind != "ours":
            metrics.append(Metric(f"long_turn{tag}_{kind}_completed", float(o.completed)))
            metrics.append(Metric(f"long_turn{tag}_{kind}_answered", float(o.answered)))
    details = {kind: o.__dict__ for kind, o in outcomes.items()}
    return metrics, details


def run(cfg: Config) -> CaseResult:
    metrics, details = scenario(40, 32_768, 1_800, "")
    out = {"40_reads_32k": details}
    if not cfg.quick:
        more, more_details = scenario(200, 131_072, 1_800, "_200")
        metrics += more
        out["200_reads_128k"] = more_details
    return CaseResult(NAME, metrics, out)
