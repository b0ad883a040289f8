"""Run an MCP server over stdio with JSON-RPC batches answered the way protocol 2025-03-26 says.

The MCP SDKs do not take batches (the protocol dropped them in 2025-06-18): a batch sent to
them is ignored. This wrapper gives the proxy's tests a server that answers them: it starts the
real server given on its command line, passes single messages through as they are, and sends
the messages of a batch to the server one by one, answering the batch with one array of the
server's answers to its requests (none for a batch of notifications only).

    python tests/mcp_proxy/batching.py -- python tests/mcp_proxy/server.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import IO, Any


class Batches:
    """The batches sent to the server whose answers are not all in yet."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.waiting: dict[Any, list[Any]] = {}  # request id -> its batch's answers list
        self.sizes: dict[int, int] = {}  # id(answers list) -> requests in its batch

    def write(self, data: bytes) -> None:
        with self.lock:
            self.out.write(data + b"\n")
            self.out.flush()

    def expect(self, ids: list[Any]) -> None:
        answers: list[Any] = []
        with self.lock:
            self.sizes[id(answers)] = len(ids)
            for request_id in ids:
                self.waiting[json.dumps(request_id)] = answers

    def answered(self, message: Any) -> bool:
        """Keep an answer that belongs to a batch (sent once the batch is complete)."""
        if not isinstance(message, dict) or "method" in message:
            return False
        with self.lock:
            answers = self.waiting.pop(json.dumps(message.get("id")), None)
            if answers is None:
                return False
            answers.append(message)
            if len(answers) < self.sizes[id(answers)]:
                return True
            del self.sizes[id(answers)]
        self.write(json.dumps(answers).encode())
        return True


def relay_answers(server: subprocess.Popen[bytes], batches: Batches) -> None:
    assert server.stdout is not None
    for line in server.stdout:
        if line.strip() and not batches.answered(json.loads(line)):
            batches.write(line.rstrip(b"\n"))


def main() -> None:
    command = sys.argv[sys.argv.index("--") + 1 :]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None
    batches = Batches(sys.stdout.buffer)
    thread = threading.Thread(target=relay_answers, args=(server, batches), daemon=True)
    thread.start()
    for line in sys.stdin.buffer:
        message = json.loads(line) if line.strip() else None
        if isinstance(message, list):
            requests = [m for m in message if isinstance(m, dict) and "method" in m and "id" in m]
            batches.expect([m["id"] for m in requests])
            lines = [json.dumps(m).encode() for m in message]
        else:
            lines = [line.rstrip(b"\n")]
        for item in lines:
            server.stdin.write(item + b"\n")
        server.stdin.flush()
    server.stdin.close()
    server.wait()
    thread.join()


if __name__ == "__main__":
    main()
