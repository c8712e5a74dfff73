"""The XML tool protocol: parse a response into one call; render results in the Part A envelope."""

from app.tools.protocol.call import ToolCall
from app.tools.protocol.parser import ParsedResponse, parse_response
from app.tools.protocol.render import (
    Element,
    ToolResult,
    el,
    format_value,
    render_error,
    render_rejected,
    render_success,
)

__all__ = [
    "Element",
    "ParsedResponse",
    "ToolCall",
    "ToolResult",
    "el",
    "format_value",
    "parse_response",
    "render_error",
    "render_rejected",
    "render_success",
]
