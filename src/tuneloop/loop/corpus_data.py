"""Which data the train phase reads, and the loop's own decontamination of it.

The corpus build writes one output per method: `sft.jsonl` (chat rows), `grpo.jsonl` (prompts
with a reference answer and scorer) and `preference.jsonl` (pairs); the replay phase writes
teacher-distilled rows and teacher pairs (`replay_sft`, `replay_dpo`, decontaminated copies in
`replay/`). `data.output` names the one training reads; unset, it follows `train.method`
(`METHOD_OUTPUTS`, first entry). A mismatch — DPO on chat rows, GRPO without references, a
replay output without a replay — is refused by `tuneloop check` (`output_problems`), and an
empty output by the phase that writes it, before anything is served.

Suites named in the loop are always decontaminated against, whatever the corpus config
lists: the data phase adds them to the build, and a directly given `train.data` is matched
by the train phase with the same rule (`data.decontam.decontaminate_file`). Deliberately
filtered, not refused: contaminated rows are left out of a copy the trainer reads
(`train/data.decontaminated.jsonl`), and every removal is listed in
`train/decontamination.json`; when nothing matches, the trainer reads the file itself. With
`train.allow_contamination` the rows are kept and only listed. User-given
`train.composite.pairs` get the same treatment (`train/pairs.decontaminated.jsonl`, listed
under `pairs` in `train/decontamination.json`), as the replay's own pairs do in `replay/`, and
so does a given `train.sft_warmup_data` (`train/warmup.decontaminated.jsonl`, under
`sft_warmup_data`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import RunLayout

REPLAY_SFT, REPLAY_DPO = "sft.decontaminated.jsonl", "dpo.decontaminated.jsonl"
# The first three restate `data.corpus`'s SFT_FILE/GRPO_FILE/PREF_FILE (pipeline.py) on
# purpose: `tuneloop check` reads these names, and any module under `tuneloop.data.corpus`,
# even one of constants only, runs that package's face first, which loads the pipeline, the
# decontamination and numpy (measured: importing such a module takes 0.7 s and loads numpy;
# this module takes 0.5 s without it). Change them together.
OUTPUT_FILES = {
    "sft": "sft.jsonl",
    "grpo": "grpo.jsonl",
    "preference": "preference.jsonl",
    "replay_sft": REPLAY_SFT,
    "replay_dpo": REPLAY_DPO,
}
METHOD_OUTPUTS: dict[str, tuple[str, ...]] = {
    "sft": ("sft", "grpo", "replay_sft"),  # grpo.jsonl: SFT on references
    "grpo": ("grpo",),
    "composite": ("grpo",),
    "dpo": ("preference", "replay_dpo"),
}
"""The outputs each built-in method trains on; the first is the default."""
WHY = {
    "preference": "DPO trains on preference pairs (prompt, chosen, rejected)",
    "grpo": "GRPO needs prompts with a reference answer to score against",
    "sft": "SFT trains on conversations that end in an answer",
}
FILTERED, REPORT = "data.decontaminated.jsonl", "decontamination.json"
PAIRS_FILTERED = "pairs.decontaminated.jsonl"
"""User-given `train.composite.pairs` without suite items (`decontaminated_given`)."""
WARMUP_FILTERED = "warmup.decontaminated.jsonl"
"""A given `train.sft_warmup_data` without suite items (`decontaminated_given`)."""


def output_phase(output: str) -> str:
    """The phase whose folder holds an output: `replay` for replay_*, else `data`."""
    return "replay" if output.startswith("replay_") else "data"


def loop_suites(cfg: LoopConfig) -> list[Path]:
    """Every suite the loop names (what no training row may contain)."""
    return [cfg.suite.path]


def corpus_output(cfg: LoopConfig) -> str:
    """The corpus output training reads: `data.output`, or the method's default."""
    return cfg.data.output or METHOD_OUTPUTS.get(cfg.train.method, ("sft",))[0]


def output_problems(cfg: LoopConfig) -> list[tuple[str, str]]:
    """(key, message) for each way the chosen output cannot feed the training method."""
    if cfg.train.data is not None:
        if cfg.data.output is not None:
            return [("data.output", "has no effect: train.data is given, not the corpus")]
        return []
    output, method = corpus_output(cfg), cfg.train.method
    if output_phase(output) == "replay":
        if cfg.replay.teachers is None:
            return [
                (
                    "data.output",
                    f"{output!r} is the replay phase's output, but there is no replay: set "
                    "replay.teachers (a teachers file) or choose a corpus output",
                )
            ]
    elif cfg.data.corpus is None:
        return []
    allowed = METHOD_OUTPUTS.get(method)
    if allowed is not None and output not in allowed:
        return [
            (
                "data.output",
                f"{output!r} ({OUTPUT_FILES[output]}) does not feed train.method {method!r}: "
                f"{WHY[allowed[0]]}; set data.output: {allowed[0]} or leave it unset",
            )
        ]
    return _corpus_disabled(cfg, output) if output_phase(output) == "data" else []


def replay_problems(cfg: LoopConfig) -> list[tuple[str, str]]:
    """(key, message) for a `replay:` section the loop cannot run, or one whose pairs
    composite training needs but cannot have."""
    r, c = cfg.replay, cfg.train.composite
    found = []
    # settings that differ from their defaults, not merely present: a resolved config
    # (`tuneloop check`'s output, an archive's inputs/loop.yaml) spells every default out
    given = sorted(r.model_dump(exclude_defaults=True))
    if r.teachers is None and given:
        keys = ", ".join(given)
        found.append(("replay.teachers", f"the replay phase needs a teachers file (set: {keys})"))
    if r.teachers is not None and r.traces is None and cfg.data.corpus is None:
        found.append(
            (
                "replay.traces",
                "the replay phase has no traces: set replay.traces (a canonical traces JSONL, "
                "`tuneloop ingest`) or data.corpus (the data phase writes traces.jsonl)",
            )
        )
    composite = cfg.train.method == "composite" and not cfg.merge.zero_adapter
    hints = c.alpha > 0 and c.hint_source == "replay" and c.hint_rows is None
    if composite and hints and r.teachers is None:
        found.append(
            (
                "train.composite.hint_rows",
                "train.composite.hint_source: replay needs the teachers' answers: set "
                "train.composite.hint_rows (a replay's sft.jsonl), or a replay: section (its "
                "distillation rows are then the default)",
            )
        )
    if composite and c.beta > 0 and c.pairs is None and r.teachers is None:
        found.append(
            (
                "train.composite.pairs",
                "train.composite.beta > 0 needs preference pairs: set train.composite.pairs, "
                "or a replay: section (its dpo pairs are then the default)",
            )
        )
    return found


def replay_unused(cfg: LoopConfig) -> str | None:
    """Why a configured replay feeds no training (a warning), or None."""
    if cfg.replay.teachers is None or cfg.merge.zero_adapter:
        return None
    if cfg.train.data is None and output_phase(corpus_output(cfg)) == "replay":
        return None
    c = cfg.train.composite
    if cfg.train.method == "composite" and c.beta > 0 and c.pairs is None:
        return None
    hints = c.alpha > 0 and c.hint_source == "replay" and c.hint_rows is None
    if cfg.train.method == "composite" and hints:
        return None
    return (
        "the replay phase runs, but training reads none of its outputs: set data.output: "
        "replay_sft | replay_dpo, or train.method: composite with train.composite.beta > 0 "
        "and train.composite.pairs unset (or alpha > 0 with hint_source: replay)"
    )


def composite_pairs(cfg: LoopConfig, run: RunLayout) -> Path | None:
    """The replay-DPO pairs composite training reads: train.composite.pairs, else the replay
    phase's decontaminated pairs (when beta > 0 and a replay ran), else None."""
    c = cfg.train.composite
    if c.pairs is not None or c.beta == 0 or cfg.replay.teachers is None:
        return c.pairs
    return run.replay / REPLAY_DPO


def composite_hint_rows(cfg: LoopConfig, run: RunLayout) -> Path | None:
    """The teacher answers self-distillation hints come from (`hint_source: replay`):
    train.composite.hint_rows, else the replay phase's decontaminated distillation rows (when
    alpha > 0 and a replay ran), else None. Hints need no decontamination of their own: one
    attaches only to a training prompt, which already is."""
    c = cfg.train.composite
    reads = c.alpha > 0 and c.hint_source == "replay"
    if c.hint_rows is not None or not reads or cfg.replay.teachers is None:
        return c.hint_rows
    return run.replay / REPLAY_SFT


def bands_serve_base(cfg: LoopConfig) -> bool:
    """Does the data phase serve the round's base to band prompts by its pass rate
    (`bands.champion.serve: base` in the corpus config)? Then the base is its input too."""
    from tuneloop.data.corpus import load_corpus_config
    from tuneloop.errors import InputError

    if cfg.data.corpus is None:
        return False
    try:
        bands = load_corpus_config(cfg.data.corpus).bands
    except InputError:
        return False  # reported under data.corpus
    return bands is not None and bands.champion is not None and bands.champion.serve == "base"


def _corpus_disabled(cfg: LoopConfig, output: str) -> list[tuple[str, str]]:
    from tuneloop.data.corpus import load_corpus_config
    from tuneloop.errors import InputError

    assert cfg.data.corpus is not None
    try:
        corpus = load_corpus_config(cfg.data.corpus)
    except InputError:
        return []  # reported under data.corpus
    off = {"preference": not corpus.preference.enabled, "grpo": not corpus.grpo.enabled}
    if off.get(output):
        section = "preference" if output == "preference" else "grpo"
        return [
            (
                "data.output",
                f"training reads {OUTPUT_FILES[output]}, but {cfg.data.corpus} sets "
                f"{section}.enabled: false, so the corpus build never writes it",
            )
        ]
    return []


def corpus_file(cfg: LoopConfig, folder: Path) -> Path:
    """The chosen output in the folder of the phase that writes it (`output_phase`);
    PhaseFailed when it is missing or empty (with where its rows went)."""
    from tuneloop.errors import PhaseFailed

    output = corpus_output(cfg)
    path = folder / OUTPUT_FILES[output]
    if output_phase(output) == "replay" and (not path.is_file() or path.stat().st_size == 0):
        from tuneloop.replay.outputs import REPORT_MD

        raise PhaseFailed(
            f"the replay wrote no rows to {path} (data.output: {output}), so train.method "
            f"{cfg.train.method!r} has nothing to train on; see {folder / REPORT_MD} for "
            f"each teacher's pass rate and {folder / REPORT} for rows removed as contaminated"
        )
    if not path.is_file() or path.stat().st_size == 0:
        from tuneloop.data.corpus import PROVENANCE_FILE

        raise PhaseFailed(
            f"the corpus build wrote no {OUTPUT_FILES[output]} (data.output: {output}), so "
            f"train.method {cfg.train.method!r} has nothing to train on; see "
            f"{folder / PROVENANCE_FILE} for where the rows went"
            + (
                ""
                if output != "grpo"
                else " (GRPO prompts need traces with a reference, a "
                "correction, or grpo.accept_min_score)"
            )
        )
    return path


def given_files(cfg: LoopConfig) -> dict[str, tuple[Path, str]]:
    """Each user-given file training reads: key → (path, name of its filtered copy)."""
    t, c = cfg.train, cfg.train.composite
    given = {"data": (t.data, FILTERED)} if t.data is not None else {}
    if t.method == "composite" and c.beta > 0 and c.pairs is not None:
        given["pairs"] = (c.pairs, PAIRS_FILTERED)
    warms = t.method in ("grpo", "composite") and t.sft_warmup_steps > 0
    if warms and t.sft_warmup_data is not None:
        given["sft_warmup_data"] = (t.sft_warmup_data, WARMUP_FILTERED)
    return given


def decontaminated_given(cfg: LoopConfig, folder: Path) -> dict[str, Path]:
    """Every given file training reads (`given_files`: a direct train.data, composite's
    replay-DPO pairs when beta > 0, the warm-up's rows), each as what the trainer reads of it (a
    filtered copy when rows must go, else the file itself), with one `REPORT` for all of them:
    a given train.data's entry at the top, the others under their key. Written together, so
    the report always describes every file of this round."""
    from tuneloop.data.files import json_bytes, write_files

    out: dict[str, Path] = {}
    whole: dict[str, Any] = {}
    files: dict[Path, bytes] = {}
    for key, (src, name) in given_files(cfg).items():
        out[key], report, copies = _filtered(cfg, src, folder / name)
        files.update(copies)
        if key == "data":
            whole |= {"data": str(src), **report}
        else:
            whole[key] = {"path": str(src), **report}
            whole.setdefault("suites", report["suites"])
    if out:
        files[folder / REPORT] = json_bytes(whole)
        write_files(files)
    return out


def _filtered(
    cfg: LoopConfig, src: Path, target: Path
) -> tuple[Path, dict[str, Any], dict[Path, bytes]]:
    """What training reads of `src` (`target` when rows must go, else `src`), the report
    entry, and the files to write (the filtered copy, when there is one)."""
    from tuneloop.data.decontam import decontaminate_file, without_lines

    found = decontaminate_file(src, loop_suites(cfg))
    keep = cfg.train.allow_contamination
    report: dict[str, Any] = {
        "suites": [str(s.path) for s in found.suites],
        "rows": found.rows,
        "contaminated": len(found.removed),
        "kept_by_allow_contamination": keep,
        "removed": removals(found.removed),
    }
    if not found.removed or keep:
        return src, report, {}
    return target, report, {target: without_lines(src, set(found.removed))}


def trained_file(
    cfg: LoopConfig, run: RunLayout, given_sha256: str | None
) -> tuple[Path, str | None]:
    """The file the train phase trained on, with its sha256 as already recorded: the runner's
    hash of a directly given train.data (`given_sha256`) or the corpus build's provenance
    (which hashes every output). A filtered copy is named with its own hash."""
    from tuneloop.records import CorpusProvenance, read_record_if_exists, sha256_file

    if cfg.train.data is not None:
        copy = run.train / FILTERED
        return (copy, sha256_file(copy)) if copy.is_file() else (cfg.train.data, given_sha256)
    output = corpus_output(cfg)
    name = OUTPUT_FILES[output]
    if output_phase(output) == "replay":
        path = run.replay / name
        return path, sha256_file(path) if path.is_file() else None
    prov = read_record_if_exists(run.corpus_provenance, CorpusProvenance)
    return run.data / name, prov.outputs.get(name) if prov is not None else None


def replay_traces(cfg: LoopConfig, run: RunLayout, folder: Path) -> Path:
    """What the replay phase replays: replay.traces, else the data phase's traces.jsonl. An
    application's own files (`replay.traces_format`: an ingester or `auto`) are ingested and
    scrubbed into `folder` first, as `tuneloop ingest` would."""
    if cfg.replay.traces is None:
        return run.corpus_traces
    if cfg.replay.traces_format == "trace":
        return cfg.replay.traces
    from tuneloop.data.files import jsonl_bytes, write_files
    from tuneloop.data.ingest.sources import ingest_planned, plan_sources
    from tuneloop.errors import InputError
    from tuneloop.scrub import Scrubber

    plan = plan_sources([cfg.replay.traces], cfg.replay.traces_format)
    traces, _, report = ingest_planned(plan)
    if not traces:
        raise InputError(
            f"replay.traces: {cfg.replay.traces}: 0 traces with format "
            f"{cfg.replay.traces_format} ({report.lines_read} read, {report.rejected} rejected)"
        )
    out = folder / "ingested_traces.jsonl"
    scrubber = Scrubber()
    write_files({out: jsonl_bytes([scrubber.trace(t).to_json() for t in traces])})
    return out


def earlier_call_logs(workdir: Path) -> list[Path]:
    """The call logs of replay folders a redo moved to `quarantine/` (newest first): a redone
    replay phase reuses their finished calls whose identity is unchanged (`store.carry_over`),
    so redoing it — a new suite, setting or code version, `--from replay` — re-pays nothing
    it already asked."""
    from tuneloop.replay.store import CALLS_FILE

    folders = [
        d
        for d in RunLayout(workdir).quarantine.glob("*-replay*")
        if d.name.split("-")[2] == "replay" and (d / CALLS_FILE).is_file()
    ]
    return [d / CALLS_FILE for d in sorted(folders, key=_quarantine_order, reverse=True)]


def _quarantine_order(folder: Path) -> tuple[str, int]:
    """`<yyyymmdd>-<hhmmss>-replay[-n]` → (stamp, n): the order the folders were moved."""
    parts = folder.name.split("-")
    return "-".join(parts[:2]), int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 1


def replay_files(cfg: LoopConfig) -> dict[str, Path]:
    """The replay phase's external inputs, hashed into its fingerprint: the teachers file,
    the traces when given, the suite (decontamination) and every embedded teacher's folder
    (a rebuilt teacher is a new replay)."""
    from tuneloop.errors import InputError
    from tuneloop.replay.teachers import load_teachers

    assert cfg.replay.teachers is not None
    files = {"teachers": cfg.replay.teachers, "suite": cfg.suite.path}
    if cfg.replay.traces is not None:
        files["traces"] = cfg.replay.traces
    try:
        teachers = load_teachers(cfg.replay.teachers, check_env=False).teachers
    except InputError:
        return files  # preflight reports it under replay.teachers
    return files | {f"teacher:{t.name}": t.embedded for t in teachers if t.embedded is not None}


def decontaminate_replay(cfg: LoopConfig, folder: Path) -> dict[str, int]:
    """Write the replay's rows and pairs without any that contain a suite item
    (`REPLAY_SFT`, `REPLAY_DPO`; the rule of `decontaminated_given`), every removal
    listed in `REPORT`; returns rows removed per file. The replayed traces are the data
    phase's before its decontamination, or a file given directly: either may hold suite items."""
    from tuneloop.data.decontam import decontaminate_file, without_lines
    from tuneloop.data.files import json_bytes, write_files
    from tuneloop.replay.outputs import DPO_FILE, SFT_FILE

    files, report, removed = {}, {}, {}
    for name, target in ((SFT_FILE, REPLAY_SFT), (DPO_FILE, REPLAY_DPO)):
        found = decontaminate_file(folder / name, loop_suites(cfg))
        files[folder / target] = without_lines(folder / name, set(found.removed))
        removed[name] = len(found.removed)
        report[name] = {
            "rows": found.rows,
            "contaminated": len(found.removed),
            "written_to": target,
            "removed": removals(found.removed),
        }
    suites = [str(s) for s in loop_suites(cfg)]
    files[folder / REPORT] = json_bytes({"suites": suites, "files": report})
    write_files(files)
    return removed


def removals(removed: dict[int, Any]) -> list[dict[str, Any]]:
    """Decontamination removals by line, as the reports list them: each line's matching rules
    and the suite items each rule matched."""
    return [
        {"line": line, "matches": [{"rule": r, "items": ids} for r, ids in why]}
        for line, why in sorted(removed.items())
    ]
