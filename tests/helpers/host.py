"""A second host: one ShortTermMemory in a child process (:mod:`helpers.host_process`),
driven one JSON command at a time, so a test can interleave what two processes do
(host A writes, host B reads at once) without sleeps."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from stm_memory import MemoryEntry, Scope

from .memory import scope_dict

__all__ = ["Host", "HostCrashed", "HostFactory"]

TESTS_DIR = Path(__file__).resolve().parent.parent

#: The child's command line. ``-c`` rather than the module's path: run as a path, the
#: helpers folder would come first on the child's ``sys.path`` and its modules
#: (``agents``, ``memory``, ``threads`` …) would shadow installed ones.
_CHILD_CODE = (
    "import sys\n"
    f"sys.path.insert(0, {str(TESTS_DIR)!r})\n"
    "from helpers.host_process import main\n"
    "main()\n"
)


class HostCrashed(Exception):
    def __init__(self, returncode: int | None, stderr: str) -> None:
        super().__init__(f"host exited with {returncode}:\n{stderr[-3000:]}")
        self.returncode = returncode
        self.stderr = stderr


class Host:
    """One ShortTermMemory in a child process: a second worker or a second machine.
    ``call(op, **kwargs)`` runs one command and returns its result."""

    def __init__(self, *, reply_timeout: float = 60.0, **config: Any) -> None:
        env = dict(os.environ)
        env.pop("PYTEST_CURRENT_TEST", None)
        self.timeout = reply_timeout
        self.stderr = ""  # what the host logged, once it is closed
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE, json.dumps(config, default=str)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._read()  # {"ready": true}: construction (and start-up replay) finished

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.wait(timeout=self.timeout)
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise HostCrashed(self.proc.returncode, stderr)
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"host command failed: {reply['error']}\n{reply['trace']}")
        return reply.get("ok", reply)

    def send(self, op: str, **kwargs: Any) -> None:
        """Start a command without waiting for it (several hosts then run at once)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}, default=str) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> Any:
        """The reply to the command sent last."""
        return self._read()

    def call(self, op: str, **kwargs: Any) -> Any:
        self.send(op, **kwargs)
        return self._read()

    def turn(self, scope: Scope, args: dict[str, Any] | None = None) -> Any:
        return self.call("turn", scope=scope_dict(scope), args=args)

    def get(self, key: str | None) -> MemoryEntry | None:
        assert key is not None
        data = self.call("get", key=key)
        return None if data is None else MemoryEntry.from_dict(data)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=self.timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


#: The ``hosts`` fixture: ``hosts(database_url=..., cache_dir=... | redis_url=..., ...)``.
HostFactory = Callable[..., Host]
