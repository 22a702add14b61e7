"""Decontaminate several row sets against several suites, with the recall audit planted in.

    run = decontaminate_sets({"rows": texts, "preference": ..., "grpo": ...}, suite_paths,
                             n=13, min_tokens=4, number_words=True, canaries=20, seed=0)
    run.suites[0].hits["rows"]     # row index → [(rule, item ids)]
    run.audit                      # per mutation: planted, caught, recall, missed

The corpus build (`tuneloop.data.corpus.steps`) and the loop's check of a directly given
`train.data` (`decontaminate_file`) both go through here, so both use the same rule
(`match.py`) and report the same way. Canaries (`audit.py`) are appended to the first set,
matched in the same batch as the real rows, and taken out of every answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuneloop.data.decontam.audit import Canary, plant, recall_report
from tuneloop.data.decontam.match import RowText, build_index, find_contaminated, group_hits
from tuneloop.data.decontam.numwords import words_to_digits
from tuneloop.data.text import conversation_text, prompt_text
from tuneloop.records import iter_jsonl, sha256_file
from tuneloop.suite import item_prompt_text, load_suite

Why = list[tuple[str, list[str]]]
"""[(rule, item ids)] for one removed row."""


@dataclass
class SuiteHits:
    """What one suite matched, per row set."""

    path: Path
    sha256: str
    revision: str
    items: int
    hits: dict[str, dict[int, Why]] = field(default_factory=dict)
    """set name → row index → why."""


@dataclass
class DecontamRun:
    suites: list[SuiteHits]
    audit: dict[str, dict[str, Any]] | None
    """Recall per mutation (`audit.recall_report`); None when not audited."""

    def why(self, i: int, name: str) -> str:
        """Why row `i` of set `name` goes, in words: the suites, rules and item ids."""
        return "; ".join(
            f"contains items of {s.path.name}: "
            + "; ".join(f"{rule} {','.join(ids)}" for rule, ids in s.hits[name][i])
            for s in self.suites
            if i in s.hits.get(name, {})
        )

    def removed(self, name: str) -> dict[int, Why]:
        """Row index → why (every suite's rules), for one set."""
        out: dict[int, Why] = {}
        for suite in self.suites:
            for i, why in suite.hits.get(name, {}).items():
                out.setdefault(i, []).extend(why)
        return out


def decontaminate_sets(
    sets: dict[str, Sequence[RowText]],
    suite_paths: Sequence[Path],
    *,
    n: int = 13,
    min_tokens: int = 4,
    number_words: bool = True,
    canaries: int | None = None,
    seed: int = 0,
) -> DecontamRun:
    """Match every set against every suite; plant `canaries` per mutation when given."""
    suites = [(Path(p), load_suite(Path(p))) for p in suite_paths]
    planted: list[Canary] = []
    if canaries:
        items = [(str(p), i.id, item_prompt_text(i)) for p, s in suites for i in s.items]
        planted = plant(items, canaries, seed)
    if number_words:  # once here, not once per suite (it costs ~35 µs a row)
        sets = {
            k: [RowText(words_to_digits(r.text), words_to_digits(r.prompt)) for r in v]
            for k, v in sets.items()
        }
        planted = [
            replace(c, row=RowText(words_to_digits(c.row.text), words_to_digits(c.row.prompt)))
            for c in planted
        ]
    first = next(iter(sets), None)
    caught: set[int] = set()
    out: list[SuiteHits] = []
    for path, suite in suites:
        index = build_index(
            str(path),
            [(i.id, item_prompt_text(i)) for i in suite.items],
            n,
            min_tokens,
            number_words=number_words,
        )
        found = SuiteHits(path, sha256_file(path), suite.revision, len(suite.items))
        for name, texts in sets.items():
            extra = [c.row for c in planted] if name == first else []
            hits = group_hits(find_contaminated([*texts, *extra], index, keyed=True))
            found.hits[name] = {i: why for i, why in hits.items() if i < len(texts)}
            caught.update(i - len(texts) for i in hits if i >= len(texts))
        out.append(found)
    return DecontamRun(out, recall_report(planted, caught) if canaries and suites else None)


def suite_report(
    found: SuiteHits, rows: Sequence[tuple[str, str]], pairs: Sequence[str], prompts: Sequence[str]
) -> dict[str, Any]:
    """One suite's entry of provenance.json `decontamination` (`records.SuiteDecontamination`),
    given each set's (source, source id) / source ids in the order they were matched."""
    return {
        "suite": str(found.path),
        "sha256": found.sha256,
        "revision": found.revision,
        "items": found.items,
        "rows_removed": len(found.hits["rows"]),
        "removed": [
            {
                "source": rows[i][0],
                "source_id": rows[i][1],
                "matches": [{"rule": rule, "items": ids} for rule, ids in why],
            }
            for i, why in found.hits["rows"].items()
        ],
        "preference_pairs_removed": sorted(pairs[i] for i in found.hits["preference"]),
        "grpo_prompts_removed": sorted(prompts[i] for i in found.hits["grpo"]),
    }


def _file_row_text(obj: dict[str, Any]) -> RowText:
    """Any training row (chat, prompt/answer, preference) as decontamination sees it."""

    def messages(value: Any) -> list[dict[str, Any]]:
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []

    prompt = messages(obj.get("messages")) or messages(obj.get("prompt"))
    rest = [
        *messages(obj.get("chosen")),
        *messages(obj.get("rejected")),
        *([{"role": "assistant", "content": str(obj["answer"])}] if "answer" in obj else []),
    ]
    return RowText(conversation_text([*prompt, *rest]), prompt_text(prompt))


@dataclass
class FileDecontamination:
    """What `decontaminate_file` found in one training file."""

    rows: int
    """Rows read."""
    removed: dict[int, Why]
    """Line number → why, for every row that contains a suite item."""
    suites: list[SuiteHits]


def decontaminate_file(
    path: Path, suite_paths: Sequence[Path], *, n: int = 13, min_tokens: int = 4
) -> FileDecontamination:
    """Match every row of a training JSONL (any shape `train.data` takes) against the suites,
    with the corpus build's rule and number-word normalization."""
    lines, texts = [], []
    for lineno, obj in iter_jsonl(Path(path)):
        lines.append(lineno)
        texts.append(_file_row_text(obj))
    run = decontaminate_sets({"rows": texts}, suite_paths, n=n, min_tokens=min_tokens)
    removed = {lines[i]: why for i, why in run.removed("rows").items()}
    return FileDecontamination(len(texts), removed, run.suites)


def without_lines(path: Path, drop: set[int]) -> bytes:
    """The file's bytes with the given 1-based lines left out (the others byte for byte)."""
    kept = [
        line
        for n, line in enumerate(Path(path).read_bytes().split(b"\n"), start=1)
        if n not in drop
    ]
    return b"\n".join(kept)
