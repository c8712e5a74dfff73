"""Agent memory tools (Part C §4 and Part B §4b) over one ``MemoryBank``.

The calling agent is always ``AgentContext.agent_id``: no tool takes an agent or a folder outside
the caller's own, so the sandbox does not depend on the model behaving. Blocking work (files, fsync,
SQLite) runs in a worker thread inside the bank's ``a``-methods, which also announce every change on
the event bus.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from app import yamltext
from app.domain.clock import ms_to_iso
from app.domain.errors import InvalidParameterError, MissingParameterError
from app.memory.bank import MemoryBank
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission

LIST_MAX_FILES = 1000
TYPE_HINTS = ("YAML", "MARKDOWN", "TEXT")
CONTENT_FORMATS = ("BASE64", "TEXT")
# characters XML text cannot carry: a file holding one is read back as base64 even when asked as
# text, so what the model reads is always exactly the file
_NOT_XML_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

FILE_PATH = ParamSpec(
    "file_path",
    ParamType.STRING,
    "Relative path in your own memory folder, e.g. 'notes/BTCUSDT_plan.md'",
    required=True,
    max_length=1024,
)


def plain_content(
    args: dict[str, Any], encoded_name: str, path: str
) -> tuple[bytes, str]:
    """The content of a write or an append, and the parameter that carried it.

    Part C gives these tools base64 parameters only, which doubles what a model writes and is
    easy to get wrong (invalid base64, or valid base64 of the wrong text); ``content`` carries
    the same bytes as plain UTF-8 text. Exactly one of the two: both or neither is refused
    before anything is written.
    """
    encoded: bytes | None = args[encoded_name]
    text: str | None = args["content"]
    if encoded is not None and text is not None:
        raise InvalidParameterError(
            f"Give the content once: <content> (plain text) or <{encoded_name}> (base64), not "
            "both. Nothing was written.",
            details={"parameter": "content", "path": path},
        )
    if text is not None:
        return text.encode("utf-8"), "content"
    if encoded is None:
        raise MissingParameterError(
            f"The content is missing: give it as <content><![CDATA[...]]></content> (plain text) "
            f"or as <{encoded_name}> (base64).",
            details={"parameter": "content", "path": path},
        )
    return encoded, encoded_name


def _check_text_hint(hint: str | None, data: bytes, path: str, param: str) -> None:
    """With a hint, the content must be UTF-8 text, and YAML must parse: refuse before writing."""
    if hint is None:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidParameterError(
            f"<file_type_hint> is {hint} but the decoded content is not UTF-8 text (byte "
            f"{exc.start}). Encode the text as UTF-8 before base64.",
            details={"parameter": param, "path": path},
        ) from None
    if hint == "YAML":
        try:
            yamltext.check(text)
        except yamltext.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise InvalidParameterError(
                f"<file_type_hint> is YAML but the content is not valid YAML{where}: "
                f"{getattr(exc, 'problem', None) or exc}. Nothing was written.",
                details={"parameter": param, "path": path},
            ) from None


ONE_CONTENT = "Give exactly one of content (plain text, best in <![CDATA[ ... ]]>) or {encoded}."


def _plain(description: str) -> ParamSpec:
    """The plain-text alternative to a base64 content parameter (see ``plain_content``)."""
    return ParamSpec(
        "content", ParamType.STRING, description, max_length=1 << 20, free_text=True,
        verbatim=True,
    )


def _as_text(data: bytes) -> str | None:
    """The file as text when XML can carry it exactly, else None (it goes as base64)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if _NOT_XML_TEXT.search(text) else text


class MemoryTools(ToolGroup):
    """The seven memory tools, each acting on the calling agent's own folder of one bank."""

    GROUP = "Agent Memory Tools"
    TOOLS = (
        ToolDef(
            name="read_agent_memory_file",
            description=(
                "Reads a file (typically YAML or Markdown) from your own memory folder. A missing "
                "file is not an error: it returns empty content with file_exists false."
            ),
            params=(
                FILE_PATH,
                ParamSpec(
                    "content_format",
                    ParamType.ENUM,
                    "TEXT returns the text itself in <content> (unless the file is not plain text)",
                    default="BASE64",
                    choices=CONTENT_FORMATS,
                ),
            ),
            permission=Permission.MEMORY,
            returns=(
                '<memory_file_content file_path_read="string">\n'
                "    <content_base64>string_base64_encoded</content_base64> "
                "<!-- or <content>text</content> -->\n"
                "    <file_exists>boolean</file_exists>\n"
                "    <file_type_hint>YAML|MARKDOWN|TEXT|UNKNOWN</file_type_hint>\n"
                "</memory_file_content>"
            ),
        ),
        ToolDef(
            name="write_agent_memory_file",
            description=(
                "Writes (or overwrites) a file in your memory folder, creating subfolders as "
                "needed. The file is replaced atomically: readers see the old or the new content."
            ),
            params=(
                FILE_PATH,
                ParamSpec(
                    "content_base64",
                    ParamType.BASE64,
                    "The content to write, base64 encoded (at most 1 MiB once decoded)",
                ),
                _plain("The content as plain text"),
                ParamSpec(
                    "file_type_hint",
                    ParamType.ENUM,
                    "A hint about the file type; with YAML the content must parse as YAML",
                    choices=TYPE_HINTS,
                ),
            ),
            permission=Permission.MEMORY,
            extra_rules=(ONE_CONTENT.format(encoded="content_base64"),),
            returns=(
                '<memory_file_written file_path_written="string" '
                'status_message="File saved successfully." />'
            ),
        ),
        ToolDef(
            name="append_to_agent_memory_file",
            description=(
                "Appends content to a file in your memory folder (created if it does not exist). "
                "Content is appended as whole lines: a final newline is added if missing."
            ),
            params=(
                FILE_PATH,
                ParamSpec(
                    "content_to_append_base64",
                    ParamType.BASE64,
                    "The content to append, base64 encoded",
                ),
                _plain("The content as plain text"),
                ParamSpec(
                    "ensure_newline_before_append",
                    ParamType.BOOLEAN,
                    "Adds a newline before appending if the file is not empty and does not end "
                    "with one",
                    default=True,
                ),
            ),
            permission=Permission.MEMORY,
            extra_rules=(ONE_CONTENT.format(encoded="content_to_append_base64"),),
            returns=(
                '<memory_file_appended file_path_appended="string" '
                'status_message="Content appended successfully." />'
            ),
        ),
        ToolDef(
            name="log_journal_entry",
            description=(
                "Appends a timestamped entry to today's journal, journal/YYYY-MM-DD.md (the "
                "market date: in a backtest, the simulated day)."
            ),
            params=(
                ParamSpec(
                    "content",
                    ParamType.STRING,
                    "What you observed, decided or learned, in plain text (not base64)",
                    required=True,
                    max_length=65536,
                    free_text=True,
                ),
            ),
            permission=Permission.MEMORY,
            returns=(
                '<journal_entry_logged file_path="journal/YYYY-MM-DD.md" line="12" '
                'time_ms="long" time_iso="YYYY-MM-DDThh:mm:ssZ" '
                'status_message="Journal entry logged." />'
            ),
        ),
        ToolDef(
            name="write_note",
            description="Creates or overwrites the topic note notes/{key}.md.",
            params=(
                ParamSpec(
                    "key",
                    ParamType.STRING,
                    "The note's name: letters, digits, '_', '-' and '.', e.g. 'position_BTCUSDT'",
                    required=True,
                    max_length=120,
                ),
                ParamSpec(
                    "content",
                    ParamType.STRING,
                    "The whole note, in plain text or Markdown (not base64)",
                    required=True,
                    max_length=262144,
                    free_text=True,
                ),
            ),
            permission=Permission.MEMORY,
            returns=(
                '<note_written key="position_BTCUSDT" file_path="notes/position_BTCUSDT.md" '
                'status_message="Note saved successfully." />'
            ),
        ),
        ToolDef(
            name="recall_memory",
            description=(
                "Searches every file of your memory (journal, notes, logs, YAML) and returns the "
                "best-ranked snippets with their file, line and score. Words, symbols such as "
                "BTC/USDT, numbers and Chinese text all work."
            ),
            params=(
                ParamSpec(
                    "query",
                    ParamType.STRING,
                    "What to look for, e.g. 'BTC/USDT RSI oversold stop loss'",
                    required=True,
                    max_length=1000,
                    free_text=True,
                ),
                ParamSpec(
                    "limit",
                    ParamType.INTEGER,
                    "How many snippets to return",
                    default=5,
                    minimum=1,
                    maximum=50,
                ),
            ),
            permission=Permission.MEMORY,
            returns=(
                "<memories>\n"
                '    <memory source="journal/YYYY-MM-DD.md" line="4" score="2.31">'
                "snippet</memory>\n"
                "</memories>"
            ),
        ),
        ToolDef(
            name="list_agent_memory_files",
            description="Lists the files of your memory folder, or of one folder inside it.",
            params=(
                ParamSpec(
                    "folder",
                    ParamType.STRING,
                    "A folder inside your memory, e.g. 'journal'; omit for everything",
                    max_length=1024,
                ),
            ),
            permission=Permission.MEMORY,
            returns=(
                "<memory_files>\n"
                '    <file path="journal/YYYY-MM-DD.md" size="840" '
                'modified_iso="YYYY-MM-DDThh:mm:ssZ" />\n'
                "</memory_files>"
            ),
        ),
    )

    def __init__(self, bank: MemoryBank) -> None:
        self._bank = bank

    async def read_agent_memory_file(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A file's bytes, as text when asked and XML can carry them exactly, else base64."""
        content = await self._bank.aread_file(ctx.agent_id, args["file_path"])
        text = _as_text(content.data) if args["content_format"] == "TEXT" else None
        return el(
            "memory_file_content",
            None,
            el("content", text) if text is not None
            else el("content_base64", base64.b64encode(content.data).decode("ascii")),
            el("file_exists", content.exists),
            el("file_type_hint", content.type_hint),
            file_path_read=content.path,
        )

    async def write_agent_memory_file(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A whole file, its content checked against its type hint before anything is written."""
        data, given = plain_content(args, "content_base64", args["file_path"])
        _check_text_hint(args["file_type_hint"], data, args["file_path"], given)
        outcome = await self._bank.awrite_file(ctx.agent_id, args["file_path"], data)
        return el(
            "memory_file_written",
            file_path_written=outcome.path,
            status_message="File saved successfully.",
        )

    async def append_to_agent_memory_file(
        self, ctx: AgentContext, args: dict[str, Any]
    ) -> Element:
        """Whole lines added to a file (made if missing)."""
        data, _given = plain_content(args, "content_to_append_base64", args["file_path"])
        outcome = await self._bank.aappend_file(
            ctx.agent_id,
            args["file_path"],
            data,
            ensure_newline=args["ensure_newline_before_append"],
        )
        return el(
            "memory_file_appended",
            file_path_appended=outcome.path,
            status_message="Content appended successfully.",
        )

    async def log_journal_entry(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """An entry in the market day's journal, stamped with the market's time."""
        outcome = await self._bank.alog_journal_entry(ctx.agent_id, args["content"])
        return el(
            "journal_entry_logged",
            file_path=outcome.path,
            line=outcome.line,
            time_ms=outcome.market_ms,
            time_iso=ms_to_iso(outcome.market_ms),
            status_message="Journal entry logged.",
        )

    async def write_note(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A topic note, replaced whole."""
        outcome = await self._bank.awrite_note(ctx.agent_id, args["key"], args["content"])
        return el(
            "note_written",
            key=args["key"],
            file_path=outcome.path,
            status_message="Note saved successfully.",
        )

    async def recall_memory(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The best-ranked snippets of the caller's memory for a query."""
        hits = await self._bank.arecall(ctx.agent_id, args["query"], args["limit"])
        return el(
            "memories",
            None,
            *(
                el("memory", hit.snippet, source=hit.path, line=hit.line, score=hit.score)
                for hit in hits
            ),
        )

    async def list_agent_memory_files(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The caller's files (or one folder's), at most ``LIST_MAX_FILES``, saying when more
        were left out."""
        files = await self._bank.alist_files(ctx.agent_id, args["folder"] or "")
        shown = files[:LIST_MAX_FILES]
        return el(
            "memory_files",
            None,
            *(
                el("file", path=f.path, size=f.size, modified_iso=ms_to_iso(f.modified_ms))
                for f in shown
            ),
            truncated=True if len(files) > len(shown) else None,
        )
