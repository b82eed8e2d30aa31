"""A tiny stdlib TCP proxy that can be stopped and restarted, to take a server "down"."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit, urlunsplit

__all__ = ["NoDelayProxy", "Proxied", "TcpProxy", "proxied"]


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``. ``stop()`` closes the listener *and*
    every forwarded connection, so pooled clients see the outage at once; ``start()``
    again listens on the same port."""

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.port = port
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def running(self) -> bool:
        return self._listener is not None

    def start(self) -> Self:
        if self._listener is not None:
            return self
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._stopping.clear()
        self._listener = listener
        self._spawn(self._accept_loop, listener)
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        listener.close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout=2)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if self._stopping.is_set():
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


class NoDelayProxy(TcpProxy):
    """TcpProxy with TCP_NODELAY on both legs. Without it, Nagle's algorithm plus
    delayed ACKs stall every psycopg pipeline round trip (executemany) by ~40 ms,
    which makes PostgreSQL through the proxy 10x slower than without."""

    def _spawn(self, target: object, *args: object) -> None:
        for arg in args:
            if isinstance(arg, socket.socket) and arg.type == socket.SOCK_STREAM:
                with contextlib.suppress(OSError):
                    arg.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super()._spawn(target, *args)


@dataclass
class Proxied:
    """A server behind a stoppable proxy: ``url`` goes through ``proxy``."""

    proxy: TcpProxy
    url: str


def proxied(url: str, default_port: int) -> Iterator[Proxied]:
    """``url``'s server behind a :class:`NoDelayProxy` for as long as this generator
    runs (a fixture body: ``yield from proxied(url, 6379)``)."""
    parts = urlsplit(url)
    proxy = NoDelayProxy(parts.hostname or "127.0.0.1", parts.port or default_port).start()
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo + '@' if userinfo else ''}127.0.0.1:{proxy.port}"
    try:
        yield Proxied(proxy, urlunsplit(parts._replace(netloc=netloc)))
    finally:
        proxy.stop()
