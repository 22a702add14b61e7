"""Suites: JSONL items with references, a content revision, and deterministic named slices.

    from tuneloop.suite import load_suite, resolve_slice, slice_ids
    suite = load_suite(Path("examples/arith/suite.jsonl"))
    gate_ids = slice_ids(suite, {"dev": 0.5, "gate": 0.5}, "gate")
    ids = resolve_slice(suite, cfg.suite, "audit+gate-003")     # any slice name of loop.yaml

Core: the contract every phase reads items through. `reader` (the file format, its checks and
the revision), `agent` (an agent item's fields and their checks), `slices` (hash slices by
fraction), `rolling` (the flywheel's one-time split into an audit part and one-look gate
slices, and the names that reach every kind of slice), `prompts` (an item's prompt as text,
for dedup and contamination keys). Each module's docstring states its exact rule, so that a
slice can be reproduced elsewhere.
"""

from tuneloop.suite.agent import AGENT_FIELDS, DEFAULT_ENVIRONMENT, check_agent_item
from tuneloop.suite.prompts import item_prompt_text, normalize_prompt
from tuneloop.suite.reader import Suite, SuiteItem, load_suite
from tuneloop.suite.rolling import (
    AUDIT,
    RollingSplit,
    gate_slice_name,
    next_gate_slice,
    resolve_slice,
    rolling_of,
    rolling_split,
    seeded_unit,
    slice_names,
)
from tuneloop.suite.slices import id_unit, slice_ids

__all__ = [
    "AGENT_FIELDS",
    "AUDIT",
    "DEFAULT_ENVIRONMENT",
    "RollingSplit",
    "Suite",
    "SuiteItem",
    "check_agent_item",
    "gate_slice_name",
    "id_unit",
    "item_prompt_text",
    "load_suite",
    "next_gate_slice",
    "normalize_prompt",
    "resolve_slice",
    "rolling_of",
    "rolling_split",
    "seeded_unit",
    "slice_ids",
    "slice_names",
]
