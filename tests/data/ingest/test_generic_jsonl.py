import json

import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.errors import InputError


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sharegpt_mapping(tmp_path):
    path = _write(
        tmp_path / "sg.jsonl",
        [
            {
                "uid": 7,
                "conversations": [
                    {"from": "human", "value": "hi"},
                    {"from": "gpt", "value": "hello"},
                ],
                "meta": {"label": "good"},
            },
            {"uid": 8, "conversations": [{"from": "alien", "value": "?"}]},
            {"uid": 9},
        ],
    )
    opts = {
        "messages": "conversations",
        "role_key": "from",
        "content_key": "value",
        "id": "uid",
        "feedback": "meta.label",
    }
    traces, rejects, report = ingest_files("generic_jsonl", [path], opts)
    assert [(t.source_id, [m.role for m in t.messages]) for t in traces] == [
        ("7", ["user", "assistant"])
    ]
    assert traces[0].feedback.verdict == "up"
    assert {r.line: r.reason for r in rejects}[3] == "bad record — missing field 'conversations'"
    assert "unknown role" in {r.line: r.reason for r in rejects}[2]
    assert report.ingested + report.rejected == report.lines_read == 3


def test_prompt_completion_mapping(tmp_path):
    path = _write(
        tmp_path / "pc.jsonl", [{"input": "2+2?", "output": "4", "sys": "Be brief.", "score": 0.9}]
    )
    opts = {"prompt": "input", "completion": "output", "system": "sys", "feedback": "score"}
    traces, _, _ = ingest_files("generic_jsonl", [path], opts)
    assert [m.role for m in traces[0].messages] == ["system", "user", "assistant"]
    assert traces[0].feedback.score == pytest.approx(0.9)
    assert traces[0].source_id == "pc:1"


def test_bad_options_are_input_errors(tmp_path):
    path = _write(tmp_path / "x.jsonl", [{}])
    with pytest.raises(InputError, match="go together"):
        ingest_files("generic_jsonl", [path], {"prompt": "a"})
    with pytest.raises(InputError, match="did you mean 'generic_jsonl'"):
        ingest_files("generic_json", [path])
