"""A TCP server that is not RocketMQ's: it answers whatever it is sent with fixed bytes."""

from __future__ import annotations

import socket
import threading


class HttpLike:
    """A TCP server that answers any bytes with an HTTP 400, as a web server on the port would."""

    def __init__(self, answer: bytes = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"):
        self.answer = answer
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.recv(65536)
                conn.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()
