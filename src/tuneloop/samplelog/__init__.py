"""The sample log: the contract between evaluate (writer) and report, gate and data (readers).

A sample log is a folder holding `samples.jsonl` — one `SampleRow` per (item, sample index),
appended as each completes — and `summary.json` (an `EvalSummary`) beside it. Rows with
status `missing` are written at the end of an eval for keys that never got a real completion;
readers count them as failures (score 0) in the denominator and report how many there were.

Agent items (a suite item with `tools`) extend the row, still one row per (item, sample):
`agent` holds the whole trajectory (`AgentTrace`: every message after the item's own, each
tool call with its outcome, turns, tokens, why the loop stopped) and `metrics` the outputs of
the further scorers the eval ran (`eval.metrics`), by scorer name. A row that uses either is
written as version 2 of the row schema; a plain row stays version 1, so a reader that predates
agents still reads plain logs, and refuses (by version, with "upgrade tuneloop") an agent log.
`rows_on_scorer` re-reads a log on one of those named outputs: that is how the report and the
gate work on any scorer's output (`report.scorer`, the bar's `scorer`).

An eval spread over several replicas (`tuneloop eval --endpoint A --endpoint B`) lists them,
with what each served, in the summary's `replicas` (summary version 3, written only then).
Which replica answered a sample is deliberately not in its row: the request does not depend on
the replica, so a greedy row is the same whichever one served it, and a log is comparable
with a single-endpoint log of the same eval row for row.

Modules: `rows` (the row and what it holds), `summary` (the summary and how an arm was
served), `read` (loading, comparability, scorer re-reads, the score grid, the hashes).
"""

from tuneloop.samplelog.read import (
    SAMPLING_BUDGET,
    ScoreGrid,
    check_comparable,
    items_sha256,
    load_sample_log,
    log_sha256,
    mean_completion_tokens,
    rows_on_scorer,
    score_grid,
)
from tuneloop.samplelog.rows import (
    SAMPLES_FILE,
    SUMMARY_FILE,
    AgentTrace,
    CallStatus,
    Confidence,
    SampleRow,
    SamplingParams,
    Status,
    ToolCall,
)
from tuneloop.samplelog.summary import (
    AgentBudget,
    EvalSummary,
    ReplicaUse,
    ServedArtifact,
    ServedAs,
)

__all__ = [
    "SAMPLES_FILE",
    "SAMPLING_BUDGET",
    "SUMMARY_FILE",
    "AgentBudget",
    "AgentTrace",
    "CallStatus",
    "Confidence",
    "EvalSummary",
    "ReplicaUse",
    "SampleRow",
    "SamplingParams",
    "ScoreGrid",
    "ServedArtifact",
    "ServedAs",
    "Status",
    "ToolCall",
    "check_comparable",
    "items_sha256",
    "load_sample_log",
    "log_sha256",
    "mean_completion_tokens",
    "rows_on_scorer",
    "score_grid",
]
