"""A corpus.yaml's schema errors and its missing inputs in one report (issue 25 item 11:
schema errors hid the rest, one more run of `corpus build` per layer)."""

from __future__ import annotations

from pathlib import Path

from ...installed import tuneloop

BROKEN = """\
sources:
  - path: nope.jsonl
    format: openai_chta
dedup: {threshold: 2}
decontaminate: {suites: [missing.jsonl]}
grpo: {scorer: exactt}
"""


def test_every_error_of_a_corpus_config_at_once(tmp_path: Path) -> None:
    (tmp_path / "corpus.yaml").write_text(BROKEN)
    ran = tuneloop("corpus", "build", tmp_path / "corpus.yaml", "--out", tmp_path / "out")
    ran.assert_input_error(
        "5 error(s)",
        "dedup.threshold (line 4): must be < 1",
        "sources.0.path (line 2): ",
        "sources.0.format (line 3): unknown ingester 'openai_chta' (did you mean 'openai_chat'?)",
        "decontaminate.suites.0 (line 5): ",
        "grpo.scorer (line 6): unknown scorer 'exactt'",
    )
    assert not (tmp_path / "out").exists()
    # a good schema: the build checks its inputs itself, all at once, as before
    (tmp_path / "corpus.yaml").write_text(BROKEN.replace("{threshold: 2}", "{threshold: 0.5}"))
    ran = tuneloop("corpus", "build", tmp_path / "corpus.yaml", "--out", tmp_path / "out")
    ran.assert_input_error("sources.0.path: ", "grpo.scorer: ")
