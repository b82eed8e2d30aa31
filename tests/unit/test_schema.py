"""Tests for stm_memory.tool.schema: the tool's JSON schema and its provider exports."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from stm_memory.model import Category, Scope, ServerSettings, UserSettings
from stm_memory.model.text import unique_slugs
from stm_memory.tool.schema import (
    tool_description,
    tool_parameters,
    tool_spec,
)
from stm_memory.tool.turn import TOOL_NAME, TurnContext
from stm_memory.wire.anthropic import messages_tool
from stm_memory.wire.openai_chat import chat_tool
from stm_memory.wire.responses import responses_tool

# A disallowed placeholder: an identifier in braces whose name the host does not expand.
DISALLOWED_PLACEHOLDER = re.compile(
    r"\{(?!(?:user|user_formatted|user_term|bot|char)\})[A-Za-z][A-Za-z0-9_]*\}", re.IGNORECASE
)


def categories(*pairs: tuple[str, str]) -> tuple[Category, ...]:
    slugs = unique_slugs([label for label, _ in pairs])
    return tuple(
        Category(label, description, slug)
        for (label, description), slug in zip(pairs, slugs, strict=True)
    )


def make_turn(cats: Sequence[Category] = (), *, override: str | None = None) -> TurnContext:
    return TurnContext(
        scope=Scope(channel_id="c1", user_id="u1", server_id="g1"),
        provider="openai",
        user_message="hi",
        settings=ServerSettings(tool_description_override=override),
        categories=tuple(cats),
        user_settings=UserSettings(),
        long_term_intent=False,
        provider_excluded=False,
        started_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


SUMMARY_TURN = make_turn()
DEFAULT_SUMMARY_TURN = make_turn([Category("Summary", "anything", "summary")])
CATEGORY_TURN = make_turn(categories(("Plot", "What happened"), ("Mood", "Tone of the scene")))
TURNS = {
    "summary": SUMMARY_TURN,
    "single-summary-category": DEFAULT_SUMMARY_TURN,
    "categories": CATEGORY_TURN,
}
EXPORTERS = {
    "openai_chat": lambda t: chat_tool(tool_spec(t))["function"]["parameters"],
    "openai_responses": lambda t: responses_tool(tool_spec(t))["parameters"],
    "anthropic": lambda t: messages_tool(tool_spec(t))["input_schema"],
}


def assert_strict_schema(schema: Any, path: str = "$") -> None:
    """OpenAI strict-mode rules: every object lists all properties as required and
    forbids additional properties; strings carry no unsupported keywords."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            assert schema.get("additionalProperties") is False, path
            props = schema.get("properties", {})
            assert sorted(schema.get("required", [])) == sorted(props), path
            assert len(schema.get("required", [])) == len(set(schema.get("required", [])))
        assert "default" not in schema, path
        for key, value in schema.items():
            assert_strict_schema(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            assert_strict_schema(item, f"{path}[{i}]")


# --- modes ------------------------------------------------------------------------------


def test_summary_mode_detection() -> None:
    assert SUMMARY_TURN.summary_mode
    assert DEFAULT_SUMMARY_TURN.summary_mode
    assert make_turn([Category(" SUMMARY ", "", "summary")]).summary_mode
    assert not CATEGORY_TURN.summary_mode
    # A lone category with another label, or "summary" next to others, is category mode.
    assert not make_turn(categories(("Notes", ""))).summary_mode
    assert not make_turn(categories(("Summary", ""), ("Mood", ""))).summary_mode


@pytest.mark.parametrize("turn", [SUMMARY_TURN, DEFAULT_SUMMARY_TURN], ids=["none", "default"])
def test_summary_mode_parameters(turn: TurnContext) -> None:
    params = tool_parameters(turn)
    assert params["type"] == "object"
    assert list(params["properties"]) == ["summary"]
    assert params["properties"]["summary"]["type"] == "string"
    assert params["required"] == ["summary"]
    assert params["additionalProperties"] is False


def test_category_mode_parameters() -> None:
    params = tool_parameters(CATEGORY_TURN)
    assert list(params["properties"]) == ["plot", "mood"]  # the server's order
    assert params["required"] == ["plot", "mood"]
    assert params["additionalProperties"] is False
    for prop in params["properties"].values():
        assert prop["type"] == "string"
    assert "What happened" in params["properties"]["plot"]["description"]
    assert "Tone of the scene" in params["properties"]["mood"]["description"]


def test_limit_is_stated_once_in_the_description() -> None:
    # Stated in the description only: field descriptions are paid for every request.
    assert "under 42 chars" in tool_description(SUMMARY_TURN, limit=42)
    assert "each under 42 chars" in tool_description(CATEGORY_TURN, limit=42)


# --- slugs as property names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "slugs"),
    [
        (["Plot", "plot", "PLOT!"], ["plot", "plot_2", "plot_3"]),
        (["1st Act", "2nd act"], ["c_1st_act", "c_2nd_act"]),
        (["Mood & Tone", "  who's   here? "], ["mood_tone", "who_s_here"]),
        (["気分", "Ärger"], ["field", "rger"]),
        (["a" * 60, "a" * 60], ["a" * 48, "a" * 46 + "_2"]),
    ],
)
def test_slugs_are_property_names(labels: list[str], slugs: list[str]) -> None:
    turn = make_turn(categories(*((label, f"about {label}") for label in labels)))
    params = tool_parameters(turn)
    assert list(params["properties"]) == slugs
    assert params["required"] == slugs
    for name in params["properties"]:
        assert re.fullmatch(r"[a-z_][a-z0-9_]{0,47}", name)
    # OpenAI and Anthropic both restrict property names to this alphabet.
    assert all(re.fullmatch(r"[a-zA-Z0-9_.-]{1,64}", name) for name in params["properties"])


# --- descriptions --------------------------------------------------------------------------


def test_category_descriptions_are_sanitized() -> None:
    turn = make_turn(
        categories(("Plot", "  What {{happened}} to {user} and {Foo} ({x y})  "), ("Mood", ""))
    )
    props = tool_parameters(turn)["properties"]
    plot = props["plot"]["description"]
    assert "What happened to {user} and Foo ({x y})" in plot
    assert "{{happened}}" not in plot and "{Foo}" not in plot
    assert not DISALLOWED_PLACEHOLDER.search(plot)
    # An empty description falls back to the label.
    assert "Mood" in props["mood"]["description"]


def test_category_label_in_description_is_sanitized() -> None:
    turn = make_turn(categories(("{{secret}} Plot", "What happened")))
    description = tool_parameters(turn)["properties"]["secret_plot"]["description"]
    assert not DISALLOWED_PLACEHOLDER.search(description)


def test_default_description_summary_mode() -> None:
    text = tool_description(SUMMARY_TURN)
    assert "working memory" in text.lower()
    assert "long-term memory" in text
    assert "explicitly" in text and "remember" in text
    assert "summary" in text
    assert "1500" in text


def test_default_description_category_mode() -> None:
    text = tool_description(CATEGORY_TURN)
    assert "working memory" in text.lower()
    assert "long-term memory" in text
    assert "explicitly" in text and "remember" in text
    assert "categor" in text
    assert text != tool_description(SUMMARY_TURN)


@pytest.mark.parametrize("mode", ["summary", "categories"])
def test_description_override_in_both_modes(mode: str) -> None:
    cats = () if mode == "summary" else CATEGORY_TURN.categories
    turn = make_turn(cats, override="  Keep {{notes}} on {user} here.  ")
    expected = "Keep notes on {user} here."
    assert tool_description(turn) == expected
    assert chat_tool(tool_spec(turn))["function"]["description"] == expected
    assert responses_tool(tool_spec(turn))["description"] == expected
    assert messages_tool(tool_spec(turn))["description"] == expected


@pytest.mark.parametrize("override", ["", "   ", None])
def test_blank_override_uses_default(override: str | None) -> None:
    assert tool_description(make_turn(override=override)) == tool_description(SUMMARY_TURN)


# --- provider exports ------------------------------------------------------------------------


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_openai_chat_tool_structure(turn: TurnContext) -> None:
    tool = chat_tool(tool_spec(turn))
    assert set(tool) == {"type", "function"}
    assert tool["type"] == "function"
    function = tool["function"]
    assert set(function) == {"name", "description", "parameters", "strict"}
    assert function["name"] == TOOL_NAME
    assert function["strict"] is True
    assert function["description"] == tool_description(turn)
    assert function["parameters"] == tool_parameters(turn)


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_openai_responses_tool_structure(turn: TurnContext) -> None:
    tool = responses_tool(tool_spec(turn))
    assert set(tool) == {"type", "name", "description", "parameters", "strict"}
    assert tool["type"] == "function"
    assert tool["name"] == TOOL_NAME
    assert tool["strict"] is True
    assert tool["parameters"] == tool_parameters(turn)


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_anthropic_tool_structure(turn: TurnContext) -> None:
    tool = messages_tool(tool_spec(turn))
    assert set(tool) == {"name", "description", "input_schema"}
    assert tool["name"] == TOOL_NAME
    assert tool["input_schema"] == tool_parameters(turn)
    assert tool["input_schema"]["type"] == "object"


@pytest.mark.parametrize("exporter", EXPORTERS.values(), ids=EXPORTERS.keys())
@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_exports_satisfy_strict_mode_rules(turn: TurnContext, exporter: Any) -> None:
    assert_strict_schema(exporter(turn))


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_openai_sdk_strict_transform_is_a_no_op(turn: TurnContext) -> None:
    """The SDK's own strict-schema pass (used by ``openai.pydantic_function_tool``) must
    find nothing to change: the schema is already strict."""
    sdk = pytest.importorskip("openai.lib._pydantic")
    ensure = getattr(sdk, "_ensure_strict_json_schema", None)
    if ensure is None:
        pytest.skip("openai SDK has no _ensure_strict_json_schema")
    params = tool_parameters(turn)
    converted = copy.deepcopy(params)
    assert ensure(converted, path=(), root=converted) == params


def _assert_typed_dict_keys(value: dict[str, Any], typed_dict: Any) -> None:
    assert set(value) <= set(typed_dict.__annotations__), (set(value), typed_dict)


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_openai_sdk_param_types_accept_exports(turn: TurnContext) -> None:
    chat_types = pytest.importorskip("openai.types.chat")
    shared = pytest.importorskip("openai.types.shared_params")
    responses = pytest.importorskip("openai.types.responses")
    chat_param = getattr(
        chat_types, "ChatCompletionFunctionToolParam", chat_types.ChatCompletionToolParam
    )

    chat = chat_tool(tool_spec(turn))
    assert TypeAdapter(chat_param).validate_python(chat) == chat
    _assert_typed_dict_keys(chat, chat_param)
    _assert_typed_dict_keys(chat["function"], shared.FunctionDefinition)

    flat = responses_tool(tool_spec(turn))
    assert TypeAdapter(responses.FunctionToolParam).validate_python(flat) == flat
    _assert_typed_dict_keys(flat, responses.FunctionToolParam)


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_anthropic_sdk_param_types_accept_export(turn: TurnContext) -> None:
    types = pytest.importorskip("anthropic.types")
    tool_param = pytest.importorskip("anthropic.types.tool_param")
    tool = messages_tool(tool_spec(turn))
    assert TypeAdapter(types.ToolParam).validate_python(tool) == tool
    _assert_typed_dict_keys(tool, types.ToolParam)
    schema = TypeAdapter(tool_param.InputSchemaTyped).validate_python(tool["input_schema"])
    assert schema["type"] == "object"


def test_exports_are_fresh_dicts() -> None:
    # Callers may mutate what they get (e.g. add cache_control); nothing may leak back.
    first = messages_tool(tool_spec(CATEGORY_TURN))
    first["input_schema"]["properties"].clear()
    first["input_schema"]["required"].append("x")
    assert messages_tool(tool_spec(CATEGORY_TURN))["input_schema"] == tool_parameters(CATEGORY_TURN)
    assert list(tool_parameters(CATEGORY_TURN)["properties"]) == ["plot", "mood"]


def test_a_tool_spec_hands_out_fresh_schemas() -> None:
    """The spec is described once per turn and shared by its requests: each API entry and
    each schema handed to a framework is its own copy, so an edited one leaks nowhere."""
    spec = tool_spec(CATEGORY_TURN)
    first = spec.schema()
    first["properties"]["plot"]["description"] = "edited"
    chat_tool(spec)["function"]["parameters"]["properties"]["mood"]["type"] = "edited"
    assert spec.schema() == tool_parameters(CATEGORY_TURN)
    assert chat_tool(spec) == chat_tool(tool_spec(CATEGORY_TURN))
    assert responses_tool(spec) == responses_tool(tool_spec(CATEGORY_TURN))
    assert messages_tool(spec) == messages_tool(tool_spec(CATEGORY_TURN))
