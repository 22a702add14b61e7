"""The data flywheel: ingest usage traces, build a clean training corpus.

    from tuneloop.data import build_corpus
    result = build_corpus(Path("examples/arith/corpus.yaml"), Path("runs/corpus"))
    result.sft_path, result.preference_path, result.provenance_path, result.counts

Modules: `ingest/` (registered ingesters: openai_chat, claude_code, generic_jsonl),
`trace` (the `tuneloop.trace/1` record), `scrub`, `dedup`, `decontam` (+ `numwords`,
`decontam_audit`: the recall audit, `decontam_run`: many sets × many suites), `bands` and
`champion` (pass rates), `rows` (SFT rows, GRPO prompt rows, preference pairs), `corpus` (the
pipeline) with `corpus_config` (corpus.yaml), `stats`, `command` (CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuneloop.data.corpus import CorpusResult, build_corpus

__all__ = ["CorpusResult", "build_corpus"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `tuneloop.data.command` (imported for `tuneloop --help`) and the ingester
    # registry do not load the corpus pipeline and numpy.
    if name in __all__:
        from tuneloop.data import corpus

        return getattr(corpus, name)
    raise AttributeError(f"module 'tuneloop.data' has no attribute {name!r}")
