"""The LLM judge's file in `replay:` (`judge: judge`, `judge_args: {judge: FILE}`), checked.

`judge_file_problems` is what `tuneloop check` (`teachers.check_replay`) and the replay
itself (`judging.judge_use`) find wrong with it, each as (`replay.judge_args.judge`,
problem): none named, not found, or the judge file's own problems (schema, rubric, key
variable; `tuneloop.scorers.judge.load_judge_spec`).
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.config.replay import ReplayConfig
from tuneloop.errors import InputError
from tuneloop.scorers.judge import load_judge_spec, load_rubric

LLM_JUDGE = "judge"
"""The registered name of the LLM judge scorer (`tuneloop.scorers.judge.scorer`)."""
FILE_KEY = "replay.judge_args.judge"


def judge_file_problems(cfg: ReplayConfig, *, check_env: bool = True) -> list[tuple[str, str]]:
    """(key, problem) for the LLM judge's file, when `replay.judge` is the LLM judge: none
    named, not found, or a judge file with problems (its schema, rubric, key variable)."""
    if cfg.judge != LLM_JUDGE:
        return []
    path = cfg.judge_args.get("judge")
    if not isinstance(path, str) or not path:
        return [(FILE_KEY, "replay.judge `judge` needs a judge file: set replay.judge_args.judge")]
    if not Path(path).is_file():
        return [(FILE_KEY, f"{path}: judge file not found")]
    try:
        spec = load_judge_spec(Path(path), check_env=check_env)
        load_rubric(spec.rubric, spec.mode)
    except InputError as err:
        return [(FILE_KEY, str(err).replace("\n  ", "\n    "))]
    return []
