"""Conversations and LLM usage: every message an agent saw or said, and what each call cost.

A task's conversation is rebuilt from these rows, so a task redelivered after a crash continues
exactly where it stopped, and any decision can be audited or replayed later. A message is committed
before anything acts on it (the assistant's tool call is stored before the tool runs). Every
message is redacted as it is stored, so no secret reaches the database, the chat or a prompt. The
tool results a message carries (a task's data, a tool's answer, the results of an answer's blocks)
are kept once, with the audit rows that recorded them (``app.store.texts``); reading a message
gives its text as it was added.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from app.domain.clock import Clock
from app.events import ConversationMessageAdded, EventBus, LLMCallRecorded
from app.redaction import redact
from app.store.db import StoreDb, store_db
from app.store.texts import MIN_SHARED_CHARS, compose

# kinds sent to the model; the others ("question", "notice", "hidden_result") are for people.
# "native_call": a call the model made through its API's tool calling, kept as its XML;
# "cut_answer": an answer the server cut at its token limit (the loop answers it with an error).
# An answer with blocks and their results are sent only when the task goes on after them (a
# block was refused), so the model sees what it wrote and what came of it.
SENT_KINDS = frozenset({
    "task", "assistant", "tool_result", "user_reply", "native_call", "cut_answer",
    "answer_blocks", "block_results",
})


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    agent_id: str
    task_id: str
    step: int
    role: str
    kind: str
    content: str
    market_ms: int
    wall_ms: int


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Totals over model calls; ``estimated_calls`` had their tokens counted by Kestrel (the
    server reported none), ``cut_answers`` were cut by the server at their token limit."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost: Decimal
    estimated_calls: int = 0
    cut_answers: int = 0


# a message is stored as its parts (``app.store.texts``): the tool results it carries and its
# long text between them are texts, each kept once; the ``messages`` view puts it back together
_INSERT = (
    "INSERT INTO message_rows (agent_id, task_id, step, role, kind, content, parts, market_ms, "
    "wall_ms) VALUES (?,?,?,?,?,?,?,?,?)"
)


class ConversationStore:
    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        bus: EventBus | None = None,
        *,
        durable: bool = True,
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._bus = bus
        # running totals for the budget checks made before every model call: summing the usage
        # rows each time would cost more with every call an agent makes
        self._spent_by_agent: dict[str, Decimal] = {}
        self._spent_by_run: dict[str, Decimal] = {}

    def close(self) -> None:
        self._db.close()

    def add(
        self, agent_id: str, task_id: str, step: int, role: str, kind: str, content: str
    ) -> StoredMessage:
        market_ms, wall_ms = self._clock.now_ms(), int(time.time() * 1000)
        content = redact(content)
        conn = self._db.conn
        if len(content) < MIN_SHARED_CHARS:
            cur = conn.execute(_INSERT, (agent_id, task_id, step, role, kind, content, None,
                                         market_ms, wall_ms))
        else:  # its long pieces go to ``texts`` once; one commit for them and the row
            with self._db.lock, (nullcontext(conn) if conn.in_transaction
                                 else self._db.transaction()):
                parts = compose(conn, content)
                cur = conn.execute(_INSERT, (
                    agent_id, task_id, step, role, kind, content if parts is None else "",
                    parts, market_ms, wall_ms))
        message = StoredMessage(
            int(cur.lastrowid or 0), agent_id, task_id, step, role, kind, content, market_ms,
            wall_ms,
        )
        if self._bus is not None:
            self._bus.publish_nowait(
                ConversationMessageAdded(agent_id, task_id, step, role, kind, content)
            )
        return message

    def messages(self, task_id: str) -> list[StoredMessage]:
        return self._rows("WHERE task_id=? ORDER BY id", (task_id,))

    def recent(self, agent_id: str, limit: int = 200) -> list[StoredMessage]:
        """The agent's latest messages across tasks, oldest first (the chat panel's history)."""
        rows = self._rows("WHERE agent_id=? ORDER BY id DESC LIMIT ?", (agent_id, limit))
        return rows[::-1]

    def _rows(self, where: str, args: tuple[object, ...]) -> list[StoredMessage]:
        rows = self._db.conn.execute(
            "SELECT id, agent_id, task_id, step, role, kind, content, market_ms, wall_ms "  # noqa: S608
            f"FROM messages {where}",
            args,
        ).fetchall()
        return [StoredMessage(*row) for row in rows]

    def record_usage(
        self,
        *,
        agent_id: str,
        task_id: str,
        run_id: str,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        cost: Decimal,
        latency_ms: float,
        estimated: bool = False,
        cut: bool = False,
    ) -> None:
        """One call: ``estimated`` when Kestrel counted its tokens (the server reported none),
        ``cut`` when the server cut the answer at its token limit."""
        self._db.conn.execute(
            "INSERT INTO llm_usage (agent_id, task_id, run_id, provider, model, input_tokens, "
            "output_tokens, cached_tokens, cost, latency_ms, market_ms, wall_ms, estimated, cut) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                agent_id, task_id, run_id, provider, model, input_tokens, output_tokens,
                cached_tokens, str(cost), latency_ms, self._clock.now_ms(),
                int(time.time() * 1000), int(estimated), int(cut),
            ),
        )
        if agent_id in self._spent_by_agent:
            self._spent_by_agent[agent_id] += cost
        if run_id in self._spent_by_run:
            self._spent_by_run[run_id] += cost
        if self._bus is not None:
            self._bus.publish_nowait(
                LLMCallRecorded(
                    agent_id, task_id, provider, model, input_tokens, output_tokens, str(cost),
                    latency_ms,
                )
            )

    def spent(self, *, agent_id: str | None = None, run_id: str | None = None) -> Decimal:
        """Money spent by an agent (all time) or in a run: read once, then kept up to date."""
        if (agent_id is None) == (run_id is None):
            raise ValueError("give exactly one of agent_id or run_id")
        cache, key = ((self._spent_by_agent, agent_id) if agent_id is not None
                      else (self._spent_by_run, run_id))
        assert key is not None
        if key not in cache:
            cache[key] = (self.usage(agent_id=agent_id) if agent_id is not None
                          else self.usage(run_id=run_id)).cost
        return cache[key]

    def calls_by_provider(
        self, *, run_id: str | None = None, since_wall_ms: int | None = None
    ) -> dict[str, int]:
        """How many calls each provider answered, e.g. to count the rule engine's decisions
        apart from language-model calls."""
        clauses: list[str] = []
        args: list[str | int] = []
        if run_id is not None:
            clauses.append("run_id=?")
            args.append(run_id)
        if since_wall_ms is not None:
            clauses.append("wall_ms>=?")
            args.append(since_wall_ms)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._db.conn.execute(
            f"SELECT provider, COUNT(*) FROM llm_usage {where} GROUP BY provider", args  # noqa: S608
        ).fetchall()
        return {str(provider): int(count) for provider, count in rows}

    def answered_models(self, *, run_id: str | None = None) -> dict[str, set[str]]:
        """Per agent, the names its language-model calls were answered under (the answer's own
        model field, as recorded): which model really ran, where an alias was asked for."""
        query = "SELECT DISTINCT agent_id, model FROM llm_usage WHERE provider != 'rule-engine'"
        if run_id is None:
            rows = self._db.conn.execute(query).fetchall()
        else:
            rows = self._db.conn.execute(f"{query} AND run_id=?", (run_id,)).fetchall()
        answered: dict[str, set[str]] = {}
        for agent_id, model in rows:
            answered.setdefault(str(agent_id), set()).add(str(model))
        return answered

    def usage(
        self,
        *,
        agent_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        since_wall_ms: int | None = None,
    ) -> UsageTotals:
        """Totals over the matching calls; costs are summed as Decimals, never floats."""
        clauses: list[str] = []
        args: list[str | int] = []
        for column, value in (("agent_id", agent_id), ("task_id", task_id), ("run_id", run_id)):
            if value is not None:
                clauses.append(f"{column}=?")
                args.append(value)
        if since_wall_ms is not None:
            clauses.append("wall_ms>=?")
            args.append(since_wall_ms)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        totals = ("COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
                  "COALESCE(SUM(estimated), 0), COALESCE(SUM(cut), 0)")
        calls, tokens_in, tokens_out, estimated, cut = self._db.conn.execute(
            f"SELECT {totals} FROM llm_usage {where}", args  # noqa: S608
        ).fetchone()
        # free calls (the rule engine, replays) are most rows: only priced ones are summed
        priced = f"{where} AND cost != '0'" if where else "WHERE cost != '0'"
        costs = self._db.conn.execute(
            f"SELECT cost FROM llm_usage {priced}", args  # noqa: S608
        ).fetchall()
        return UsageTotals(
            calls=int(calls), input_tokens=int(tokens_in), output_tokens=int(tokens_out),
            cost=sum((Decimal(r[0]) for r in costs), Decimal(0)),
            estimated_calls=int(estimated), cut_answers=int(cut),
        )
