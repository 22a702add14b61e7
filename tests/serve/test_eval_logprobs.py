"""`eval.logprobs` against the embedded server, through the OpenAI client: every row of a chat
and a text-completion item carries its confidence, and the figures are the server's own."""

from __future__ import annotations

import json
from pathlib import Path

from tuneloop.config import EvalConfig, ServeConfig, SlicingConfig
from tuneloop.evaluate import evaluate
from tuneloop.samplelog import load_sample_log
from tuneloop.serving import serving


def test_each_row_records_the_answers_confidence(tiny_model: Path, tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    items = [
        {"id": f"c{i}", "messages": [{"role": "user", "content": f"{i} + 1 ="}], "answer": "1"}
        for i in range(4)
    ] + [{"id": f"p{i}", "prompt": f"{i} + 2 =", "answer": "2"} for i in range(4)]
    suite.write_text("".join(json.dumps(i) + "\n" for i in items))
    settings = EvalConfig(max_tokens=4, logprobs=True)
    with serving(tiny_model, ServeConfig(backend="embedded"), log_path=tmp_path / "log") as ep:
        summary = evaluate(
            [ep.base_url], ep.model, suite, tmp_path / "out", settings, slicing=SlicingConfig()
        )
    assert summary.sampling.logprobs and summary.to_json()["schema"] == "tuneloop.eval_summary/4"
    _, rows = load_sample_log(tmp_path / "out")
    assert len(rows) == 8 and all(r.status == "ok" for r in rows)
    for row in rows:
        c = row.confidence
        assert c is not None and c.tokens == row.completion_tokens
        assert c.mean_logprob <= 0 and (c.min_margin is None or c.min_margin >= 0)
