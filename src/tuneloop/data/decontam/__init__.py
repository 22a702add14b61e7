"""Decontamination: remove training rows that contain an evaluation item, and measure how
many disguised items the rule catches.

    run = decontaminate_sets({"rows": texts}, suite_paths, canaries=20)
    found = decontaminate_file(Path("train.jsonl"), suite_paths)

Modules: `match` (the rule — shared normalized n-grams or the whole prompt — and its
vectorized fast path over `fasttok` token hashes), `numwords` (number words ↔ digits, matched
alike), `audit` (the recall audit: canaries per mutation), `sets` (many row sets × many suite
files, with the audit planted in; a training file).
"""

from tuneloop.data.decontam.audit import (
    MUTATIONS,
    Canary,
    Mutation,
    plant,
    recall_failures,
    recall_report,
)
from tuneloop.data.decontam.match import (
    Hits,
    RowText,
    SuiteIndex,
    build_index,
    find_contaminated,
    find_contaminated_reference,
    group_hits,
)
from tuneloop.data.decontam.sets import (
    DecontamRun,
    FileDecontamination,
    SuiteHits,
    Why,
    decontaminate_file,
    decontaminate_sets,
    suite_report,
    without_lines,
)

__all__ = [
    "MUTATIONS",
    "Canary",
    "DecontamRun",
    "FileDecontamination",
    "Hits",
    "Mutation",
    "RowText",
    "SuiteHits",
    "SuiteIndex",
    "Why",
    "build_index",
    "decontaminate_file",
    "decontaminate_sets",
    "find_contaminated",
    "find_contaminated_reference",
    "group_hits",
    "plant",
    "recall_failures",
    "recall_report",
    "suite_report",
    "without_lines",
]
