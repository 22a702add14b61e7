import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuneloop.data.ingest import ingest_files
from tuneloop.data.ingest.base import Reject, run_ingester
from tuneloop.records.trace import Message, Trace


def test_a_line_no_plugin_claims_is_rejected_as_unaccounted(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"b": 2}\nnot json\n')

    def lazy(file, lines):  # a buggy plugin: uses line 1, forgets line 3
        for lineno, _ in lines:
            if lineno == 1:
                yield Trace(
                    source="t",
                    source_id="1",
                    source_file=file,
                    source_lines=[1],
                    messages=[Message(role="user", content="x")],
                )

    traces, rejects, report = run_ingester(lazy, path)
    assert (report.lines_read, report.blank, report.ingested, report.rejected) == (3, 1, 1, 2)
    assert {(r.line, r.category) for r in rejects} == {(3, "unaccounted"), (4, "malformed")}
    assert isinstance(rejects[0], Reject)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "uuid",
                    "parentUuid",
                    "message",
                    "messages",
                    "role",
                    "content",
                    "request",
                    "response",
                    "choices",
                    "tool_calls",
                    "sessionId",
                    "isSidechain",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(json_values, max_size=8),
    fmt=st.sampled_from(["openai_chat", "claude_code", "generic_jsonl"]),
)
def test_any_input_is_accounted_for_without_crashing(tmp_path, rows, fmt):
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    _, rejects, report = ingest_files(fmt, [path])
    assert report.ingested + report.rejected == report.lines_read == len(rows) + 1
    assert all(r.category != "unaccounted" for r in rejects)
