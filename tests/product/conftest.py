"""What the product tests share: the environment a newcomer's offline run gets."""

from __future__ import annotations

import os

import pytest

#: Variables that would let a README block or a notebook reach a provider.
PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
)
#: Nothing listens on port 9 (discard): a real client fails fast, nothing leaves the host.
CLOSED_URL = "http://127.0.0.1:9"


def offline_environment() -> dict[str, str]:
    """This process's environment without provider keys, the provider base URLs pointing
    at a closed port: code that tried to reach an API fails instead of calling it."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(OPENAI_BASE_URL=f"{CLOSED_URL}/v1", ANTHROPIC_BASE_URL=CLOSED_URL)
    return env


@pytest.fixture
def offline_env() -> dict[str, str]:
    return offline_environment()
