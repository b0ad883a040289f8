"""Reading a hook event from stdin, within a size cap (shared by the hook alone and its client).

Kept apart and small: the client imports it on every hook call.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import BinaryIO

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The largest hook event read: a larger one is drained unread and its call proceeds unchecked."""


def read_event(stream: "BinaryIO") -> "bytes | None":
    """The event's bytes, or None when it is larger than :data:`MAX_EVENT_BYTES`.

    A larger event is read to its end and dropped, so the CLI writing it never meets a closed
    pipe.
    """
    data = stream.read(MAX_EVENT_BYTES + 1)
    if len(data) <= MAX_EVENT_BYTES:
        return bytes(data)
    while stream.read(1 << 20):
        pass
    return None
