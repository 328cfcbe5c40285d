"""A loopback socket that answers as a PostgreSQL server asking for the password in clear.

What a hostile or impersonated server does to harvest a password: after the startup message
it sends AuthenticationCleartextPassword (protocol "R", code 3), and a client that complies
sends the password as it is. The fake records each connection and every byte received after
its request, so a test can say the password never left.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

#: The protocol's requests to upgrade before the startup message (SSLRequest, GSSENCRequest):
#: answered "N" (no), as a server without TLS does.
_UPGRADE_CODES = (80877103, 80877104)
#: AuthenticationCleartextPassword: "R", length 8, code 3 (PostgreSQL protocol, "Message
#: Formats").
_ASK_CLEARTEXT = b"R" + struct.pack("!II", 8, 3)


class CleartextServer:
    """`with CleartextServer() as server:` a listening port; `server.connections` counts the
    clients that connected, `server.received` holds what each sent after the request."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self.connections = 0
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> CleartextServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(5)
                try:
                    self.received.append(self._ask_in_clear(conn))
                except OSError:
                    self.received.append(b"")

    @staticmethod
    def _ask_in_clear(conn: socket.socket) -> bytes:
        while True:
            head = conn.recv(8)
            if len(head) < 8:
                return b""
            length, code = struct.unpack("!II", head)
            if length > 8:
                conn.recv(length - 8)
            if code not in _UPGRADE_CODES:
                break
            conn.sendall(b"N")
        conn.sendall(_ASK_CLEARTEXT)
        data = b""
        conn.settimeout(1)  # a complying client sends its password, then waits for a reply
        try:
            while chunk := conn.recv(4096):
                data += chunk
        except TimeoutError:
            pass
        return data
