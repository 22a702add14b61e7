"""One replay against the embedded tiny model (examples/arith/model), served by the
`embedded` backend for the run: a handful of steps, a few tokens each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config.replay import ReplayConfig
from tuneloop.records import read_jsonl
from tuneloop.replay import replay

MODEL = Path(__file__).resolve().parents[2] / "examples" / "arith" / "model"


@pytest.mark.skipif(not (MODEL / "model.safetensors").is_file(), reason="no tiny model")
def test_embedded_teacher_answers_and_is_scored(tmp_path: Path, kit) -> None:
    pairs = [(37, 45), (12, 30), (8, 9), (51, 26)]
    traces = kit.write_traces(
        tmp_path / "traces.jsonl",
        [kit.arith_trace(i, a, b, system=False) for i, (a, b) in enumerate(pairs)],
    )
    teachers = tmp_path / "teachers.yaml"
    teachers.write_text(
        f"teachers:\n  - name: tiny\n    embedded: {MODEL}\n"
        "    price: {input_per_1m: 1.0, output_per_1m: 2.0}\n"
        "    sampling: {max_tokens: 8}\n"
    )
    out = tmp_path / "out"
    report = replay(traces, teachers, out, ReplayConfig(concurrency=4)).report
    (tiny,) = report.teachers
    assert (tiny.missing, tiny.malformed, tiny.scored) == (0, 0, 4)
    assert tiny.prompt_tokens > 0 and 0 < tiny.completion_tokens <= 4 * 8
    cost = (tiny.prompt_tokens * 1.0 + tiny.completion_tokens * 2.0) / 1e6
    assert tiny.cost_usd == pytest.approx(cost)
    calls = read_jsonl(out / "calls.jsonl")
    assert all(c["model"] == str(MODEL) and c["response"]["content"] for c in calls)
    assert report.sft_rows == tiny.passed and (out / "teacher-tiny.log").is_file()
    print(f"tiny model: {tiny.passed}/{tiny.scored} passed, {tiny.completion_tokens} tokens")
