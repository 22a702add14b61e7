"""Health checks for a checkpoint before it is served: `tuneloop doctor MODEL_DIR`.

Checks, in order: weights present and the shard index consistent with the files (every
file named in `model.safetensors.index.json` exists and holds the tensors it claims); every
tensor finite; tensor shapes match the config (the model is instantiated on the meta device,
so no memory is spent); the tokenizer survives a save/load round trip; the generation config
stops on the chat template's end-of-turn token; and a greedy, chat-templated generation stops
before its token limit. A failure makes `ok` false (exit 1) with a message naming the tensor,
file or token; a check that cannot even read its input (a truncated safetensors file) is a
failed check too, never a crash. `fix_stop_tokens` repairs only generation_config.json, never
weights. The generation smoke runs only when the weights passed, since it would fail for their
reason.

`stop_token_ids` checks a checkpoint as the loop serves it: under the round's decoding contract
(`decoding.py`), whose stop ids replace the checkpoint's own eos ids. `doctor_arms(base,
merged)` is the loop's doctor phase: both checkpoints checked under the base's contract, plus a
`decoding` check comparing their decoding metadata (differences the contract overrides are
reported as fixed; any other difference fails it).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.records import atomic_write_text
from tuneloop.train.checkpoint.chat import end_of_turn_id, eos_ids, with_stop_token
from tuneloop.train.checkpoint.decoding import (
    DecodingComparison,
    compare_decoding,
    load_generation_config,
    read_decoding,
)
from tuneloop.train.common import quiet

INDEX = "model.safetensors.index.json"
SMOKE_PROMPT = "What is 2 + 3?"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class DoctorReport:
    model_dir: Path
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def weight_files(model_dir: Path) -> tuple[dict[str, str], list[str]]:
    """(tensor name → file, problems) from the shard index or the single safetensors file."""
    from safetensors import safe_open

    index = model_dir / INDEX
    if not index.is_file():
        single = model_dir / "model.safetensors"
        if not single.is_file():
            return {}, [f"no model.safetensors or {INDEX} in {model_dir}"]
        with safe_open(str(single), framework="pt") as fh:
            return {k: single.name for k in fh.keys()}, []  # noqa: SIM118
    claimed: dict[str, str] = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    problems = []
    for fname in sorted(set(claimed.values())):
        path = model_dir / fname
        if not path.is_file():
            problems.append(f"shard {fname} named in {INDEX} is missing")
            continue
        with safe_open(str(path), framework="pt") as fh:
            held = set(fh.keys())
        lost = [k for k, f in claimed.items() if f == fname and k not in held]
        if lost:
            problems.append(f"shard {fname} lacks {len(lost)} tensor(s) it claims, e.g. {lost[0]}")
    return claimed, problems


def nonfinite_tensors(model_dir: Path, files: dict[str, str]) -> list[str]:
    """`name (file): n non-finite values` for each tensor with NaN or inf."""
    import torch
    from safetensors import safe_open

    bad = []
    for fname in sorted(set(files.values())):
        with safe_open(str(model_dir / fname), framework="pt") as fh:
            for name in fh.keys():  # noqa: SIM118
                t = fh.get_tensor(name)
                if t.is_floating_point():
                    n = int((~torch.isfinite(t)).sum())
                    if n:
                        bad.append(f"{name} ({fname}): {n} non-finite value(s)")
    return bad


def shape_mismatches(model_dir: Path, files: dict[str, str]) -> list[str]:
    """Compare checkpoint tensor shapes with a meta-device instance of the config."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(model_dir))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    expected = {k: tuple(v.shape) for k, v in saved_layout(model).items()}
    problems = []
    for fname in sorted(set(files.values())):
        with safe_open(str(model_dir / fname), framework="pt") as fh:
            for name in fh.keys():  # noqa: SIM118
                shape = tuple(fh.get_slice(name).get_shape())
                if name not in expected:
                    problems.append(f"{name} ({fname}) is not a parameter of the config's model")
                elif expected[name] != shape:
                    problems.append(f"{name}: shape {shape} but config implies {expected[name]}")
    tied = bool(getattr(config, "tie_word_embeddings", False))
    for name in sorted(set(expected) - set(files)):
        if not (tied and name.startswith("lm_head")):
            problems.append(f"{name}: missing from the checkpoint")
    return problems


def saved_layout(model: Any) -> dict[str, Any]:
    """The state dict as `save_pretrained` writes it: transformers 5 holds some weights fused
    in memory (a mixture-of-experts layer's experts as one tensor) and splits them on save."""
    try:
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:  # transformers 4: memory and file layouts are the same
        return dict(model.state_dict())
    return dict(revert_weight_conversion(model, model.state_dict()))


def tokenizer_round_trip(model_dir: Path, tok: Any = None) -> tuple[Any, str]:
    """(tokenizer, problem or '') after saving, reloading and re-encoding a probe text; `tok`
    is the tokenizer already loaded from `model_dir`, if the caller has it."""
    from transformers import AutoTokenizer

    if tok is None:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    probe = "What is 37 + 45? Ünïcode ok.\n  spaces\t"
    if getattr(tok, "chat_template", None):
        probe = str(tok.apply_chat_template([{"role": "user", "content": probe}], tokenize=False))
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        again = AutoTokenizer.from_pretrained(tmp)
    a = tok(probe, add_special_tokens=False)["input_ids"]
    b = again(probe, add_special_tokens=False)["input_ids"]
    if a != b:
        return tok, "token ids differ after save/load"
    if tok.decode(a) != probe:
        return tok, f"decode(encode(text)) != text: {tok.decode(a)!r}"
    return tok, ""


def stop_token_problem(
    model_dir: Path, tok: Any, fix: bool, served: tuple[int, ...] | None = None
) -> tuple[bool, str]:
    """Whether the generation config (or the `served` contract, when given) stops on the
    end-of-turn token; repair generation_config.json if `fix`."""
    eot = end_of_turn_id(tok)
    if eot is None:
        return False, "cannot determine the chat template's end-of-turn token"
    name = tok.convert_ids_to_tokens(eot)
    gen = load_generation_config(model_dir)
    if eot in eos_ids(gen):
        return True, f"eos_token_id includes {name} ({eot})"
    if served is not None and not fix:
        if eot in served:
            return True, (
                f"served with stop ids {list(served)} (the decoding contract), which include "
                f"{name} ({eot}); generation_config.json alone has {eos_ids(gen)}"
            )
        return False, f"the served stop ids {list(served)} lack the end-of-turn {name} ({eot})"
    if not fix:
        return False, (
            f"generation_config.json eos_token_id {eos_ids(gen)} lacks the end-of-turn token "
            f"{name} ({eot}); run `tuneloop doctor --fix-stop-tokens`"
        )
    with_stop_token(gen, eot)
    atomic_write_text(model_dir / "generation_config.json", gen.to_json_string())
    return True, f"fixed: added {name} ({eot}) to generation_config.json eos_token_id"


def generation_smoke(
    model_dir: Path, tok: Any, eot: int | None, served: tuple[int, ...] | None = None
) -> tuple[bool, str]:
    """Greedy chat-templated generation must stop (end-of-turn/eos, or the `served` stop ids)
    before its limit."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    msgs = [{"role": "user", "content": SMOKE_PROMPT}]
    enc = tok.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    room = int(getattr(model.config, "max_position_embeddings", 256)) - enc["input_ids"].shape[1]
    limit = max(1, min(128, room))
    if served is not None:
        stops = set(served)
    else:
        stops = set(eos_ids(model.generation_config)) | ({eot} if eot is not None else set())
    with torch.no_grad():
        out = model.generate(
            **enc,
            max_new_tokens=limit,
            do_sample=False,
            eos_token_id=sorted(stops) or None,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        )
    new = out[0, enc["input_ids"].shape[1] :].tolist()
    text = tok.decode(new, skip_special_tokens=True)
    if new and new[-1] in stops:
        return True, f"stopped after {len(new)} token(s): {text!r}"
    return False, f"did not stop within {limit} tokens: {text[:80]!r}"


def _guard(name: str, fn: Callable[[], tuple[bool, str]]) -> Check:
    try:
        ok, detail = fn()
    except Exception as err:  # a check that crashes is a failed check, not a crashed doctor
        ok, detail = False, f"{type(err).__name__}: {err}"
    return Check(name, ok, detail)


def _shards(model_dir: Path) -> tuple[dict[str, str], Check]:
    """(tensor name → file, the `shards` check); an unreadable file is a failed check."""
    try:
        files, problems = weight_files(model_dir)
    except Exception as err:  # a truncated or corrupt file: safetensors cannot read its header
        detail = f"cannot read the weights ({type(err).__name__}: {err}); truncated or corrupt?"
        return {}, Check("shards", False, detail)
    detail = "; ".join(problems) or f"{len(set(files.values()))} file(s), {len(files)} tensors"
    return ({} if problems else files), Check("shards", not problems, detail)


def doctor(
    model_dir: Path,
    *,
    fix_stop_tokens: bool = False,
    stop_token_ids: tuple[int, ...] | None = None,
    tokenizer: Any = None,
) -> DoctorReport:
    """Run every check on `model_dir`; the report's `.ok` is False on any failure.

    `stop_token_ids`: the decoding contract the checkpoint is served under (see module doc).
    `tokenizer`: the one already loaded from `model_dir`, so that it is not read twice.
    """
    quiet()
    model_dir = Path(model_dir)
    report = DoctorReport(model_dir)
    if not (model_dir / "config.json").is_file():
        report.checks.append(Check("config", False, f"{model_dir}/config.json not found"))
        return report
    files, shards = _shards(model_dir)
    report.checks.append(shards)
    if files:
        report.checks.append(_guard("finite", lambda: _listed(nonfinite_tensors(model_dir, files))))
        report.checks.append(_guard("shapes", lambda: _listed(shape_mismatches(model_dir, files))))
    else:  # checking no tensor would read as "all good"; every tensor "missing" is noise
        report.checks += [
            Check(name, False, "not run: the weights could not be read (see shards)")
            for name in ("finite", "shapes")
        ]
    tok_box: list[Any] = []

    def tok_check() -> tuple[bool, str]:
        tok, problem = tokenizer_round_trip(model_dir, tokenizer)
        tok_box.append(tok)
        return not problem, problem or "save/load round trip identical"

    report.checks.append(_guard("tokenizer", tok_check))
    if not tok_box:
        return report
    tok, served = tok_box[0], stop_token_ids
    report.checks.append(
        _guard("stop_tokens", lambda: stop_token_problem(model_dir, tok, fix_stop_tokens, served))
    )
    if files and all(c.ok for c in report.checks):
        eot = end_of_turn_id(tok)
        report.checks.append(
            _guard("generation", lambda: generation_smoke(model_dir, tok, eot, served))
        )
    else:
        report.checks.append(Check("generation", False, "not run: an earlier check failed"))
    return report


def _listed(problems: list[str]) -> tuple[bool, str]:
    if not problems:
        return True, "all good"
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    return False, "; ".join(problems[:5]) + more


@dataclass
class ArmsReport:
    """The doctor phase: both arms checked under one contract, and their decoding compared."""

    base: DoctorReport
    merged: DoctorReport
    decoding: Check
    """Base vs merged decoding metadata (fails on a difference the contract cannot fix)."""
    comparison: DecodingComparison | None
    """None when the metadata could not be read (the `decoding` check says why)."""

    @property
    def ok(self) -> bool:
        return self.base.ok and self.merged.ok and self.decoding.ok


def doctor_arms(base: Path, merged: Path) -> ArmsReport:
    """Check base and merged under the base's decoding contract and compare their metadata.

    Each tokenizer is loaded once, for the comparison and the doctor's checks alike."""
    from transformers import AutoTokenizer

    base, merged = Path(base), Path(merged)
    toks: dict[Path, Any] = {}
    cmp: DecodingComparison | None = None
    try:
        for path in (base, merged):
            toks[path] = AutoTokenizer.from_pretrained(str(path))
        cmp = compare_decoding(read_decoding(base, toks[base]), read_decoding(merged, toks[merged]))
    except Exception as err:  # unreadable tokenizer or config: the doctor reports, not crashes
        decoding = Check("decoding", False, f"cannot read decoding metadata: {err}")
    else:
        detail = "; ".join(cmp.problems) or "; ".join(cmp.fixed) or "identical"
        if cmp.problems:
            detail = f"the arms would decode differently: {detail}"
        decoding = Check("decoding", not cmp.problems, detail)
    served = cmp.stop_token_ids if cmp is not None else None
    return ArmsReport(
        base=doctor(base, stop_token_ids=served, tokenizer=toks.get(base)),
        merged=doctor(merged, stop_token_ids=served, tokenizer=toks.get(merged)),
        decoding=decoding,
        comparison=cmp,
    )
