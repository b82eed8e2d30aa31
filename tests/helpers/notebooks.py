"""Running notebooks and README blocks offline, as the product tests do.

One copy for every test that executes a notebook (``tests/product``,
``tests/evaluation``): the environment without provider keys and with the provider base
URLs on a closed port, a kernel of this interpreter, and readers of what a notebook
printed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

__all__ = [
    "CLOSED_URL",
    "KERNEL",
    "PROVIDER_VARIABLES",
    "offline_environment",
    "output_text",
    "outputs",
    "read",
    "venv_kernel",
]

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
KERNEL = "python3"


def offline_environment() -> dict[str, str]:
    """This process's environment without provider keys, the provider base URLs pointing
    at a closed port: code that tried to reach an API fails instead of calling it."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(OPENAI_BASE_URL=f"{CLOSED_URL}/v1", ANTHROPIC_BASE_URL=CLOSED_URL)
    return env


def venv_kernel() -> AsyncKernelManager:
    """A python3 kernel manager whose kernel runs ``sys.executable -m ipykernel_launcher``.

    With no kernel directories, the only spec is ipykernel's native one, built for the
    running interpreter; a ``python3`` kernelspec elsewhere cannot take its place.
    """
    specs = KernelSpecManager(kernel_dirs=[])
    return AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def read(path: os.PathLike[str] | str) -> Any:
    return nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def outputs(nb: Any) -> Iterator[Any]:
    for cell in nb.cells:
        yield from cell.get("outputs", [])


def output_text(nb: Any) -> str:
    """Everything the notebook printed or displayed as text."""
    parts = []
    for output in outputs(nb):
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(output.data.get("text/plain", ""))
    return "\n".join(parts)
