"""The data phase: ingest usage traces, build a clean training corpus.

    from tuneloop.data.corpus import build_corpus
    result = build_corpus(Path("examples/arith/corpus.yaml"), Path("runs/corpus"))
    result.sft_path, result.preference_path, result.provenance_path, result.counts

Layout: `ingest/` (registered ingesters — openai_chat, claude_code, generic_jsonl — and
feedback normalization), `corpus/` (the `tuneloop corpus build` pipeline, its config
`corpus.yaml`, its rows, difficulty bands, the Ray executor, `corpus stats`), `decontam/`
(the decontamination rule, its recall audit, many row sets × many suites), `dedup` (exact
and MinHash near-duplicate removal), `text` (the normalization and tokens they all match
on), `files` (all-or-nothing writes), `command` (the CLI). Scrubbing is `tuneloop.scrub`.

This package face re-exports nothing: importing `tuneloop.data.command` (for `tuneloop
--help`) or the ingesters must not load the corpus pipeline and numpy.
"""
