"""A Server-Sent Events client for the tests: reads the control port's
`GET /sessions/{s}/events` line by line, as the proxy sends it, on a thread.

`http.client` is used rather than `requests` because its `readline` returns as
soon as a line arrives, so the tests can tell a stream that streams from one
that only flushes when it ends.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any


class EventStreamReader(threading.Thread):
    """Reads `GET /sessions/{s}/events` line by line as the proxy sends it."""

    def __init__(self, port: int, session: str) -> None:
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection.request("GET", f"/sessions/{session}/events", headers={"Accept": "text/event-stream"})
        self.response = self.connection.getresponse()
        self.messages: list[tuple[str, Any]] = []  # (event name, data)
        self.error: BaseException | None = None

    def run(self) -> None:
        event, data = "message", []
        try:
            while True:
                line = self.response.readline()
                if not line:
                    return
                text = line.decode().rstrip("\r\n")
                if text.startswith("event:"):
                    event = text[6:].strip()
                elif text.startswith("data:"):
                    data.append(text[5:].strip())
                elif not text and data:
                    self.messages.append((event, json.loads("\n".join(data))))
                    event, data = "message", []
        except (OSError, ValueError) as error:
            self.error = error

    def urls(self) -> list[str]:
        return [data["url"] for _, data in self.messages if isinstance(data, dict) and "url" in data]

    def close(self) -> None:
        self.connection.close()
