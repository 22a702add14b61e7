"""Ingester `aider`: Aider's chat transcript (`.aider.chat.history.md`) and its LLM log
(`.aider.llm.history`, written with `--llm-history-file`), told apart by their content.

Run: `tuneloop ingest --format aider .aider.chat.history.md .aider.llm.history -o t.jsonl`.

**Chat transcript.** Markdown keyed on line prefixes, as `aider/io.py` appends it:
`# aider chat started at <local time>` starts a session; `#### ` lines are what the user typed;
`> ` lines are aider's own output (announcements, token reports, questions, errors — only the
first line of a multi-line message is prefixed, and every message ends in a Markdown hard
break, so an output line without one runs on to the next non-blank line with one); other
text, after a blank line, is the model's reply, SEARCH/REPLACE edit blocks included (kept as
text, counted in `metadata.edit_blocks`). Records are these blocks, numbered from 1 in file
order (a reject names the record; its reason, the line). Per session:
- inputs become user messages; `/ask`, `/code`, `/architect`, `/context`, `/help <q>` and `/ok`
  send their text to the model and become user messages of that text; other `/commands`
  (abbreviations resolved as aider does) and `!shell` are skipped as `command`, `<blank>` as
  `empty input`; `/clear` and `/reset` empty the model's context, so the session is cut there
  into separate traces (`<file>:<header line>`, then `#2`, `#3`, …);
- replies become assistant messages; a leading `<thinking-content-…>` / `<think>` block is the
  reasoning (option `reasoning: drop` leaves it out). A reply that follows no input (aider
  sent lint or test output, shown only as output) is counted in `metadata.unlogged_inputs`;
- output blocks are skipped as `aider output`, but read for the model (`Model:`, `Main
  model:`, `Models:` announcements; a switch after the first reply goes to
  `metadata.model_switches`) and the `Tokens: … Cost: $…` reports (`metadata.usage`). Text
  before a session's first input is output too (a `--show-repo` dump, an Emacs mode line);
- the header merges into the session's first trace (`started_at`: the local time as written,
  no zone; `metadata.session_id`); a session with no turns skips it as `empty session`.
Deliberately: the prompt aider built around the user's text (system prompt, repository map,
file contents) is not in the transcript, so not in the trace — the LLM log has it.

**LLM log.** Each request is `TO LLM <time>` and its messages (separated by `-------`, every
line prefixed with its role: `SYSTEM `, `USER `, `ASSISTANT `); its reply is `LLM RESPONSE
<time>` and `ASSISTANT ` lines. Records are these two sections. A request with its reply is
one trace (`<file>:<line of TO LLM>`): the full prompt exactly as the model saw it (each
request resends the chat, so traces of one session overlap); no model is logged. A request
whose reply is empty or missing (a failed or interrupted call) is a `dropped` reject, both
sections; text outside a section is `malformed`. Logged image parts become `[image]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import Reject, check_options
from tuneloop.data.ingest.detect import sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter
from tuneloop.records.trace import Message, Trace

HEADER = re.compile(r"^# aider chat started at (.+?)\s*$")
TO_LLM = re.compile(r"^TO LLM (\S+)\s*$")
RESPONSE = re.compile(r"^LLM RESPONSE (\S+)\s*$")
ROLE_LINE = re.compile(r"^(SYSTEM|USER|ASSISTANT)(?: (.*))?$")
MODEL = re.compile(r"^(?:Main model|Model|Models): (\S+?)⚡? with ")
TOKENS = re.compile(r"^Tokens: ([\d.,]+k?) sent, .*?([\d.,]+k?) received\.(?: Cost: \$([\d.]+))?")
REASONING = re.compile(
    r"\A\s*<(thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b|think|thinking)>"
    r"([\s\S]*?)</\1>\s*"
)
COMMANDS = """model editor-model weak-model chat-mode models web commit lint clear reset tokens
undo diff add drop git test run exit quit ls help ask code architect context ok voice paste
read-only map map-refresh settings load save multiline-mode copy report editor edit
think-tokens reasoning-effort copy-context""".split()  # noqa: SIM905
"""Aider's commands: an input runs the one its first word is a unique prefix of (`/ex`)."""
TO_MODEL = {"ask", "code", "architect", "context", "help", "ok"}
OK_TEXT = "Ok, please go ahead and make those changes."


def is_chat_history(path: Path) -> bool:
    """A session header in the first 64 KiB (a transcript may start mid-session)."""
    return any(HEADER.match(line) for line in sniff_text(path, 1 << 16).splitlines())


def is_llm_history(path: Path) -> bool:
    """A first line `TO LLM <time>`."""
    head = sniff_text(path, 256).lstrip()
    return TO_LLM.match(head.split("\n", 1)[0]) is not None


def is_aider(path: Path) -> bool:
    """An Aider chat transcript or LLM log, told by content (never by name alone)."""
    return path.is_file() and (is_llm_history(path) or is_chat_history(path))


@document_ingester("aider", detect=is_aider)
def aider(**options: Any) -> DocumentConverter:
    """Aider chat transcripts and LLM logs."""
    check_options("aider", options, {"reasoning"})
    keep = options.get("reasoning", "keep")
    if keep not in ("keep", "drop"):
        raise InputError("ingester 'aider': option reasoning must be 'keep' or 'drop'")

    def convert(source: Path) -> Parsed:
        if source.is_dir():
            raise InputError(
                f"{source}: is a folder; give .aider.chat.history.md or .aider.llm.history"
            )
        lines = _read_lines(source)
        if is_llm_history(source):
            return read_llm_history(str(source), lines, keep_reasoning=keep == "keep")
        return read_chat_history(str(source), lines, keep_reasoning=keep == "keep")

    return convert


def _read_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte {err.start})") from None
    return text.replace("\r\n", "\n").split("\n")


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, answer) of a reply that opens with a reasoning block."""
    found = REASONING.match(text)
    if found is None:
        return None, text
    return found.group(2).strip() or None, text[found.end() :]


# ---- chat transcript --------------------------------------------------------------------------


@dataclass
class Block:
    """One record of a chat transcript: a run of lines of one kind."""

    kind: str  # header | user | output | text
    line: int  # 1-based line of its first line
    lines: list[str] = field(default_factory=list)


def chat_blocks(lines: list[str]) -> list[Block]:
    """The transcript's blocks in order (blank lines separate; they are not records).

    Aider ends every message it appends with a Markdown hard break ("  "), and prefixes only
    the first line of a multi-line output with "> ": an output line without the break opens
    a message that runs, blank lines and all, to the next non-blank line that ends with one
    (the text was stripped, so its last line is never blank)."""
    blocks: list[Block] = []
    prev_blank = True
    open_output = False
    for number, line in enumerate(lines, start=1):
        last = blocks[-1] if blocks else None
        kind = _line_kind(line)
        if open_output and last is not None and kind != "header":
            last.lines.append(line if kind == "output" else "> " + line)
            open_output = not (line.endswith("  ") and line.strip())
            continue
        open_output = False
        if kind == "blank":
            if last is not None and last.kind == "text":
                last.lines.append("")
            prev_blank = True
            continue
        same_run = last is not None and last.kind == kind and (kind == "text" or not prev_blank)
        if kind == "text" and last is not None and last.kind == "output" and not prev_blank:
            last.lines.append("> " + line)  # unprefixed output from an older aider
        elif same_run and last is not None:
            last.lines.append(line)
        else:
            blocks.append(Block(kind, number, [line]))
        if kind == "output":
            open_output = not line.endswith("  ") and line.strip() != ">"
        prev_blank = False
    for block in blocks:
        while block.kind == "text" and block.lines and not block.lines[-1].strip():
            block.lines.pop()
    return blocks


def _line_kind(line: str) -> str:
    if not line.strip():
        return "blank"
    if HEADER.match(line):
        return "header"
    if line.startswith("#### ") or line.rstrip() == "####":
        return "user"
    if line.startswith("> ") or line.rstrip() == ">":
        return "output"
    return "text"


def _strip(line: str, prefix: str) -> str:
    body = line[len(prefix) :] if line.startswith(prefix) else line.lstrip(prefix.strip())
    return body[:-2] if body.endswith("  ") else body.rstrip("\n")


class _Segment:
    """One context of a session: a session is cut at /clear and /reset."""

    def __init__(self, model: str | None) -> None:
        self.messages: list[Message] = []
        self.records: list[int] = []
        self.model_at: list[tuple[int, str]] = [(0, model)] if model else []
        self.usage: dict[str, float] = {}
        self.edit_blocks = 0
        self.unlogged_inputs = 0
        """Replies that follow no logged input (aider sent lint or test output, or retried)."""


class _Session:
    """Turns one session's blocks into segments, counting what it skips in `parsed`."""

    def __init__(self, parsed: Parsed, keep_reasoning: bool) -> None:
        self.parsed = parsed
        self.keep = keep_reasoning
        self.segments = [_Segment(None)]
        self.model: str | None = None
        self.asked = False  # a reply needs an input before it; earlier text is aider's

    def add(self, n: int, block: Block) -> None:
        seg = self.segments[-1]
        if block.kind == "output" or (block.kind == "text" and not self.asked):
            self.parsed.skip("aider output")
            self._read_output(seg, block)
        elif block.kind == "text":
            reasoning, answer = split_reasoning("\n".join(block.lines))
            if not seg.messages or seg.messages[-1].role == "assistant":
                seg.unlogged_inputs += 1
            content = answer.strip("\n") or None
            reasoning = reasoning if self.keep else None
            seg.messages.append(Message(role="assistant", content=content, reasoning=reasoning))
            seg.edit_blocks += sum(1 for line in block.lines if line.rstrip() == "<<<<<<< SEARCH")
            seg.records.append(n)
        else:
            kind, content = _user_input("\n".join(_strip(line, "#### ") for line in block.lines))
            if kind == "clear":
                self.parsed.skip("command")
                self.segments.append(_Segment(self.model))
            elif content is None:
                self.parsed.skip(kind)
            else:
                seg.messages.append(Message(role="user", content=content))
                seg.records.append(n)
                self.asked = True

    def _read_output(self, seg: _Segment, block: Block) -> None:
        for line in block.lines:
            body = _strip(line, "> ")
            if found := MODEL.match(body):
                self.model = found.group(1)
                seg.model_at.append((len(seg.messages), self.model))
            elif found := TOKENS.match(body):
                _add_usage(seg.usage, found)


def read_chat_history(file: str, lines: list[str], *, keep_reasoning: bool = True) -> Parsed:
    """A chat transcript's lines → its sessions' traces (see the module docstring)."""
    blocks = chat_blocks(lines)
    parsed = Parsed(records=len(blocks))
    starts = [i for i, b in enumerate(blocks) if b.kind == "header"]
    for begin, end in zip([0, *starts], [*starts, len(blocks)], strict=True):
        if begin == end:
            continue
        header = blocks[begin] if blocks[begin].kind == "header" else None
        session = _Session(parsed, keep_reasoning)
        for i in range(begin + (1 if header else 0), end):
            session.add(i + 1, blocks[i])
        started = HEADER.match(header.lines[0]).group(1) if header else None  # type: ignore[union-attr]
        where = f"{Path(file).name}:{header.line if header else 1}"
        traces = [
            _segment_trace(file, where, started, k, seg)
            for k, seg in enumerate(session.segments)
            if seg.messages
        ]
        if header is not None and traces:
            traces[0].source_lines.insert(0, begin + 1)
        elif header is not None:
            parsed.skip("empty session")
        parsed.traces.extend(traces)
    return parsed


def _user_input(text: str) -> tuple[str, str | None]:
    """(kind, content for the model or None) of one user input."""
    if text.strip() in ("", "<blank>"):
        return "empty input", None
    if text.startswith("!"):
        return "command", None
    if not text.startswith("/"):
        return "message", text
    first, _, more = text.partition("\n")
    word, _, rest = first[1:].partition(" ")
    rest = f"{rest}\n{more}" if more else rest
    word = word.lower()
    matches = [c for c in COMMANDS if c.startswith(word)]
    command = word if word in COMMANDS else (matches[0] if len(matches) == 1 else None)
    if command in ("clear", "reset"):
        return "clear", None
    if command == "ok":
        return "message", f"{OK_TEXT} {rest.strip()}".strip()
    if command in TO_MODEL and rest.strip():
        return "message", rest.strip()
    return "command", None


def _add_usage(usage: dict[str, float], found: re.Match[str]) -> None:
    """Add one `Tokens: 2.3k sent, 86 received. Cost: $0.01 …` report to `usage`."""
    sent, received, cost = found.groups()
    for key, text in (("tokens_sent", sent), ("tokens_received", received), ("cost_usd", cost)):
        if text:
            scale = 1000 if text.endswith("k") else 1
            usage[key] = usage.get(key, 0) + float(text.rstrip("k").replace(",", "")) * scale


def _segment_trace(file: str, where: str, started: str | None, k: int, seg: _Segment) -> Trace:
    first_reply = next((i for i, m in enumerate(seg.messages) if m.role == "assistant"), 0)
    in_effect = [name for at, name in seg.model_at if at <= first_reply]
    model = in_effect[-1] if in_effect else None
    switches, current = [], model
    for at, name in seg.model_at:
        if at > first_reply and name != current:
            switches.append({"at_message": at, "model": name})
            current = name
    meta: dict[str, Any] = {"session_id": started or where}
    if switches:
        meta["model_switches"] = switches
    if seg.usage:
        meta["usage"] = {
            key: round(value, 6) if key == "cost_usd" else int(value)
            for key, value in seg.usage.items()
        }
    if seg.edit_blocks:
        meta["edit_blocks"] = seg.edit_blocks
    if seg.unlogged_inputs:
        meta["unlogged_inputs"] = seg.unlogged_inputs
    return Trace(
        source="aider",
        source_id=where + (f"#{k + 1}" if k else ""),
        source_file=file,
        source_lines=sorted(seg.records),
        messages=seg.messages,
        model=model,
        started_at=started.replace(" ", "T") if started else None,
        metadata=meta,
    )


# ---- LLM log ----------------------------------------------------------------------------------


def llm_sections(lines: list[str]) -> list[tuple[str, int, str, list[str]]]:
    """(kind: request | response | stray, first line, time, lines) of each section."""
    sections: list[tuple[str, int, str, list[str]]] = []
    for number, line in enumerate(lines, start=1):
        if found := TO_LLM.match(line):
            sections.append(("request", number, found.group(1), []))
        elif found := RESPONSE.match(line):
            sections.append(("response", number, found.group(1), []))
        elif sections:
            sections[-1][3].append(line)
        elif line.strip():
            sections.append(("stray", number, "", [line]))
    return sections


def _prompt(lines: list[str]) -> list[Message]:
    """The messages of a `TO LLM` section."""
    messages: list[tuple[str, list[str | None]]] = []
    separated = True
    for line in lines:
        if line.rstrip() == "-------":
            separated = True
            continue
        found = ROLE_LINE.match(line)
        if found is None:
            if messages:
                messages[-1][1].append(line)
            continue
        role, body = found.group(1).lower(), found.group(2) or ""
        if separated or messages[-1][0] != role:
            messages.append((role, []))
        messages[-1][1].append(_part(body))
        separated = False
    return [
        Message(role=role, content="\n".join(b for b in body if b is not None))  # type: ignore[arg-type]
        for role, body in messages
    ]


def _part(body: str) -> str | None:
    """A line of a logged message; the `type:` lines of list content are dropped."""
    if body.startswith("Image_url URL: "):
        return "[image]"
    if re.match(r"^type: \w+$", body):
        return None
    return body[len("text: ") :] if body.startswith("text: ") else body


def read_llm_history(file: str, lines: list[str], *, keep_reasoning: bool = True) -> Parsed:
    """An LLM log's lines → one trace per request with its reply (see the module docstring)."""
    sections = llm_sections(lines)
    parsed = Parsed(records=len(sections))
    name = Path(file).name
    for i, (kind, line, when, body) in enumerate(sections):
        n, previous = i + 1, sections[i - 1][0] if i else None
        if kind == "stray":
            parsed.rejects.append(Reject(file, n, f"line {line}: text before the first TO LLM"))
        elif kind == "response" and previous != "request":
            parsed.rejects.append(Reject(file, n, f"line {line}: LLM RESPONSE without a request"))
        elif kind == "request":
            reply = sections[i + 1] if i + 1 < len(sections) else None
            reply = reply if reply and reply[0] == "response" else None
            answer = "\n".join(_strip_role(x) for x in reply[3]).strip("\n") if reply else ""
            prompt = _prompt(body)
            if not answer.strip() or not prompt:
                why = "request without a reply (a failed or interrupted call)"
                why = why if prompt else "request without messages"
                dropped = [(n, line, why)] + ([(n + 1, reply[1], "its reply")] if reply else [])
                parsed.rejects += [
                    Reject(file, k, f"line {at}: {w}", "dropped") for k, at, w in dropped
                ]
                continue
            reasoning, content = split_reasoning(answer)
            reasoning = reasoning if keep_reasoning else None
            prompt.append(
                Message(role="assistant", content=content.strip("\n") or None, reasoning=reasoning)
            )
            parsed.traces.append(
                Trace(
                    source="aider",
                    source_id=f"{name}:{line}",
                    source_file=file,
                    source_lines=[n, n + 1],
                    messages=prompt,
                    started_at=when,
                    ended_at=reply[2] if reply else None,
                    metadata={"session_id": f"{name}:{line}"},
                )
            )
    return parsed


def _strip_role(line: str) -> str:
    found = ROLE_LINE.match(line)
    return (found.group(2) or "") if found else line
