"""`tuneloop corpus build` and `tuneloop corpus stats`: traces → a clean SFT corpus, a GRPO
prompt set and preference pairs, and what is in a corpus file.

    from tuneloop.data.corpus import build_corpus
    result = build_corpus(Path("examples/arith/corpus.yaml"), Path("runs/corpus"))

Modules: `pipeline` (the build, in order, and what it writes), `config` (corpus.yaml),
`steps` (the row steps: rows, filter, dedup, decontaminate, bands), `training_rows` (a trace
cut to a training row; preference pairs; GRPO prompt rows), `judge_cut` (unlabelled rows kept
by an LLM judge's grade), `bands` and `champion_rates`
(difficulty bands from a sample log or from the champion's endpoint), `ray` (the per-row
steps on Ray Data), `stats` (`corpus stats`).
"""

from tuneloop.data.corpus.config import CorpusConfig, load_corpus_config
from tuneloop.data.corpus.pipeline import (
    GRPO_FILE,
    PREF_FILE,
    PROVENANCE_FILE,
    REJECTS_FILE,
    REMOVED_FILE,
    SFT_FILE,
    TRACES_FILE,
    CorpusResult,
    build_corpus,
)
from tuneloop.data.corpus.stats import corpus_stats
from tuneloop.data.corpus.training_rows import Row, to_row

__all__ = [
    "GRPO_FILE",
    "PREF_FILE",
    "PROVENANCE_FILE",
    "REJECTS_FILE",
    "REMOVED_FILE",
    "SFT_FILE",
    "TRACES_FILE",
    "CorpusConfig",
    "CorpusResult",
    "Row",
    "build_corpus",
    "corpus_stats",
    "load_corpus_config",
    "to_row",
]
