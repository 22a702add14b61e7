"""What the per-format ingest tests share: one source through an ingester with the accounting
checked, tool calls counted, and tool results checked against the calls they answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.data.ingest import ingest_files


def balanced(report: Any) -> bool:
    """Every record read was merged, rejected or skipped: the accounting rule."""
    return report.ingested + report.rejected + sum(report.skipped.values()) == report.lines_read


def ingest_one(fmt: str, source: Path, **options: Any) -> tuple[list, list, Any]:
    """(traces, rejects, report) of one file or session folder, its accounting checked."""
    traces, rejects, report = ingest_files(fmt, [source], options)
    assert balanced(report), report
    return traces, rejects, report


def n_calls(trace: Any) -> int:
    """Tool calls in a trace."""
    return sum(len(m.tool_calls or []) for m in trace.messages)


def assert_paired(trace: Any, *, turns_close_calls: bool = False) -> None:
    """Each tool message answers, by id, a call of the assistant message before it that no
    other result answered; `turns_close_calls`: a user or system message ends the calls."""
    open_calls: set[str] = set()
    for m in trace.messages:
        if m.role == "assistant":
            open_calls = {c.id for c in m.tool_calls or []}
        elif m.role == "tool":
            assert m.tool_call_id in open_calls, m
            open_calls.discard(m.tool_call_id)
        elif turns_close_calls:
            open_calls = set()


def assert_ingest_hides(fmt: str, sources: list[Path], out: Path, materials: list[str]) -> None:
    """`tuneloop ingest -f fmt SOURCES -o OUT` succeeds, and no planted secret (`materials`)
    is in anything it wrote or printed."""
    from typer.testing import CliRunner

    from tuneloop.cli import build_app

    argv = ["ingest", "-f", fmt, *map(str, sources), "-o", str(out)]
    ran = CliRunner().invoke(build_app(), argv)
    assert ran.exit_code == 0, ran.output
    written = b"".join(p.read_bytes() for p in out.parent.iterdir())
    for material in materials:
        assert material.encode() not in written and material not in ran.output, material
