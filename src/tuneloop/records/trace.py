"""The canonical conversation record every ingester writes: `tuneloop.trace/1`.

One `Trace` is one conversation as the model saw it, in OpenAI chat shape (roles `system`,
`user`, `assistant`, `tool`; assistant `tool_calls` with JSON-string arguments; tool results
as `tool` messages naming the `tool_call_id` they answer), plus where it came from (source
name, file, the line numbers it was built from, the id the source gave it), timestamps, the
model that answered, and the user's feedback when there was any.

Defined here, in core, because more than one phase reads it: the data phase writes and reads
traces (`tuneloop.data`, whose ingesters build them and whose `normalize_feedback` maps a
source's feedback to `Feedback`), and the replay phase reads them (`tuneloop.replay.plan`).
Deliberately not kept: images and other non-text content blocks (replaced by a
`[image]`-style placeholder so turn structure survives) and provider signatures of hidden
reasoning.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One tool invocation requested by an assistant message."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The call id that the matching `tool` message names in `tool_call_id`."""
    name: str
    """Tool (function) name."""
    arguments: str = "{}"
    """Arguments as a JSON string, exactly as OpenAI chat messages carry them."""


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    """system, user, assistant or tool."""
    content: str | None = None
    """Text content; None for an assistant message that only calls tools."""
    tool_calls: list[ToolCall] | None = None
    """Assistant only: the tools it called, in order."""
    tool_call_id: str | None = None
    """Tool only: the id of the call this message answers."""
    name: str | None = None
    """Tool only: the tool's name, when the source gives it."""
    reasoning: str | None = None
    """Assistant only: visible reasoning ("thinking") text, kept apart from `content`."""
    is_error: bool | None = None
    """Tool only: the source marked this result as an error."""

    def to_chat(self, *, with_reasoning: bool = False) -> dict[str, Any]:
        """The OpenAI chat dict for this message (None fields left out)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        if with_reasoning and self.reasoning:
            out["reasoning_content"] = self.reasoning
        return out


class Feedback(BaseModel):
    """The user's judgement of a trace, normalized."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["up", "down"] | None = None
    """Thumbs up / down when the source says so (or a score maps to one)."""
    score: float | None = None
    """In [0, 1]: up = 1, down = 0, a rating r on 1..5 = (r - 1) / 4, a score as given."""
    raw: Any = None
    """The feedback exactly as the source wrote it."""
    correction: str | None = None
    """The right answer as the user supplied it (a traffic log's feedback `correction`), when
    there was one; the trace's last assistant message stays what the model actually said."""


class Reference(BaseModel):
    """A verifiable answer the source logged with a conversation (a task with a known result)."""

    model_config = ConfigDict(extra="forbid")

    answer: str
    """The reference answer a scorer compares a completion with."""
    scorer: str | None = None
    """The registered scorer that checks it (`numeric`, `exact`, …); None leaves the choice
    to the corpus config's `grpo.scorer` or the trainer's default."""
    scorer_args: dict[str, Any] = {}
    """Arguments for the scorer's factory, as a suite item's `scorer_args`."""


class Trace(Record):
    """One conversation from a usage log, in canonical form."""

    KIND = "trace"
    VERSION = 1

    source: str
    """Source name: the ingester's name, or the `name` of a corpus-config source."""
    source_id: str
    """The id the source gave this conversation (response id, session id, ...), or
    `<file stem>:<line>` when it gave none."""
    source_file: str
    """The file it was read from."""
    source_lines: list[int]
    """1-based line numbers of every input line merged into this trace."""
    messages: list[Message]
    """The conversation, in order."""
    model: str | None = None
    """The model that produced the assistant turns, when recorded."""
    started_at: str | None = None
    """ISO 8601 timestamp of the first message or request, when recorded."""
    ended_at: str | None = None
    """ISO 8601 timestamp of the last message or response, when recorded."""
    feedback: Feedback | None = None
    """User feedback, when there was any."""
    reference: Reference | None = None
    """A verifiable answer logged with the conversation (`reference`/`answer` + `scorer`,
    `scorer_args` on the log line), when there was one."""
    metadata: dict[str, Any] = {}
    """Source-specific extras (tools offered, sidechain flag, compaction summaries, title)."""
