"""The one exception raised for malformed annotations."""

from __future__ import annotations

_MAX_SHOWN = 120


def _show(text: str) -> str:
    """Quote the offending text, shortened so a huge annotation does not flood a log line."""
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 1] + "…"
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


class ProtocolError(ValueError):
    """An annotation value that does not follow docs/protocol.md.

    The message names the annotation, the place inside the value (segment, device, field) and
    the offending text, e.g.::

        volcano.sh/devices-to-allocate: segment 1, device 0, field usedmem: not a uint32 (got "12x")

    Attributes keep the parts apart for callers that build their own message.
    """

    def __init__(self, annotation: str, where: str, reason: str, text: str | None = None):
        self.annotation = annotation
        self.where = where
        self.reason = reason
        self.text = text
        parts = [annotation]
        if where:
            parts.append(where)
        msg = ": ".join(parts) + f": {reason}"
        if text is not None:
            msg += f" (got {_show(text)})"
        super().__init__(msg)
