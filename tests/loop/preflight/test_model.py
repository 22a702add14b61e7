"""The preflight's model check (`loop/preflight/model.py`) on the family matrix's checkpoints.

Each case loads a real loop.yaml (`load_config`) beside a real suite and runs `preflight`,
then reads the findings; the settings around the model are valid, so the model check's
errors are the only ones. One case runs the installed `tuneloop check` as a user does.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuneloop.config import load_config
from tuneloop.loop.preflight import Findings, preflight

from ...installed import tuneloop

FAMILIES = Path(__file__).resolve().parents[3] / "examples" / "families"
CHATML = FAMILIES / "templates" / "chatml.jinja"
PLAIN = FAMILIES / "templates" / "gpt2.jinja"
"""Turns ended by GPT-2's own eos: the template a base without one can be given."""
FIXES = ("`model.chat_template: FILE`", "completion-mode suite", "/v1/completions")

CONFIG = """\
base_model: {base}
serve:
  backend: embedded
suite:
  path: suite.jsonl
  default_scorer: numeric
  slices: {{dev: 0.5, gate: 0.5}}
train:
  method: sft
  data: train.jsonl
gate:
  min_items: 10
  margin: 0.5
"""


def chat(i: int, system: bool = False) -> dict[str, Any]:
    turns = [{"role": "user", "content": f"{i}+1="}]
    if system:
        turns.insert(0, {"role": "system", "content": "Answer with a number."})
    return {"id": f"q{i}", "messages": turns, "answer": str(i + 1)}


def completion(i: int) -> dict[str, Any]:
    return {"id": f"q{i}", "prompt": f"{i}+1=", "answer": str(i + 1)}


CHAT = [chat(i) for i in range(40)]


def project(
    tmp_path: Path, base: Path, items: list[dict[str, Any]] = CHAT, extra: str = ""
) -> Path:
    """A loop.yaml (CONFIG + `extra`) on `base`, its suite of `items`, and train data."""
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    (tmp_path / "loop.yaml").write_text(CONFIG.format(base=base) + extra)
    return tmp_path / "loop.yaml"


def check(tmp_path: Path, base: Path, items: list[dict[str, Any]] = CHAT, extra: str = ""):
    """(the preflight's findings, its errors as (key, message))."""
    found: Findings = preflight(load_config(project(tmp_path, base, items, extra)))
    return found, [(e.key, e.message) for e in found.errors]


def copy_of(family_model: Callable[[str], Path], tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(family_model(name), tmp_path / name))


def edit_json(path: Path, **changes: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


# ---- no chat template --------------------------------------------------------------------------


def test_a_base_without_template_and_a_chat_suite_names_both_fixes(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    gpt2 = family_model("gpt2")
    found, errors = check(tmp_path, gpt2)
    assert [key for key, _ in errors] == ["base_model"]
    message = errors[0][1]
    assert message.startswith(f"{gpt2}: no chat template, and suite suite.jsonl has 40 chat")
    assert "(first: q0)" in message
    for fix in FIXES:
        assert fix in message, message
    assert "  chat template: none (completion-mode suites only)" in found.notes


def test_a_completion_suite_still_needs_a_template_for_sft(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    gpt2 = family_model("gpt2")
    _, errors = check(tmp_path, gpt2, [completion(i) for i in range(40)])
    assert [key for key, _ in errors] == ["base_model"]
    message = errors[0][1]
    assert message.startswith(f"{gpt2}: no chat template, and train.method sft renders")
    assert "`model.chat_template: FILE`" in message
    assert "completion" not in message and "prompt" not in message, message


def test_model_chat_template_gives_the_base_a_template(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    found, errors = check(
        tmp_path, family_model("gpt2"), extra=f"model:\n  chat_template: {PLAIN}\n"
    )
    assert errors == []
    chat_line = next(n for n in found.notes if n.startswith("  chat template:"))
    assert chat_line.startswith(f"  chat template: model.chat_template {PLAIN} (sha256 ")
    assert "; end of turn <|endoftext|>" in chat_line, chat_line


def test_a_template_ending_turns_with_a_token_the_vocabulary_lacks_is_refused(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    """ChatML's <|im_end|> is no token of GPT-2's vocabulary: no turn could ever end."""
    gpt2 = family_model("gpt2")
    _, errors = check(tmp_path, gpt2, extra=f"model:\n  chat_template: {CHATML}\n")
    assert errors == [
        (
            "model.chat_template",
            "the chat template ends an assistant turn with '<|im_end|>', which is no special "
            f"token of {gpt2 / 'tokenizer.json'}: generation could never stop at the end of a "
            "turn (use a template that ends turns with a token the tokenizer has, such as its "
            "eos token '<|endoftext|>')",
        )
    ]


def test_a_missing_model_chat_template_is_an_error_under_its_key(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    found, errors = check(
        tmp_path, family_model("gpt2"), extra="model:\n  chat_template: no_such.jinja\n"
    )
    assert errors == [("model.chat_template", f"{tmp_path / 'no_such.jinja'}: not found")]
    assert found.notes == []


def test_an_empty_model_chat_template_is_an_error_under_its_key(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    (tmp_path / "empty.jinja").write_text("  \n")
    _, errors = check(
        tmp_path, family_model("gpt2"), extra="model:\n  chat_template: empty.jinja\n"
    )
    assert errors == [("model.chat_template", f"{tmp_path / 'empty.jinja'}: empty")]


# ---- a template that cannot render the suite ---------------------------------------------------


def test_a_template_refusing_a_system_turn_names_the_item(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    items = [chat(i) for i in range(20)] + [chat(i, system=True) for i in range(20, 40)]
    _, errors = check(tmp_path, family_model("gemma3"), items)
    assert [key for key, _ in errors] == ["suite.path"]
    message = errors[0][1]
    assert message.startswith(
        f"{tmp_path / 'suite.jsonl'}: item q20 (roles system, user): the chat template "
        "cannot render it: "
    ), message
    _, errors = check(tmp_path, family_model("gemma3"), CHAT)  # no system turn: fine
    assert errors == []


def test_a_normal_base_passes_and_states_its_facts(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    found, errors = check(tmp_path, family_model("llama"))
    assert errors == [] and found.warnings == []
    assert found.notes[0].startswith("model: LlamaForCausalLM (llama), vocabulary ")
    assert "  chat template: chat_template.jinja (sha256 " in found.notes[1]
    assert "; end of turn <|eot_id|> (4); system role yes; tools native" in found.notes[1]
    assert found.notes[2].startswith("  tokens: bos <|begin_of_text|>, eos <|eot_id|>")


# ---- folders that cannot be read as a causal LM ------------------------------------------------


def test_an_unknown_architecture_names_config_json(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    model = copy_of(family_model, tmp_path, "llama")
    edit_json(model / "config.json", model_type="nosucharch")
    _, errors = check(tmp_path, model)
    assert errors == [
        (
            "base_model",
            f"{model / 'config.json'}: model_type 'nosucharch' is an architecture this "
            "transformers does not know (upgrade transformers, or check the folder)",
        )
    ]


def test_a_folder_without_tokenizer_files_is_one_error(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    model = copy_of(family_model, tmp_path, "llama")
    (model / "tokenizer.json").unlink()
    _, errors = check(tmp_path, model)
    assert errors == [
        (
            "base_model",
            f"{model}: no tokenizer files (looked for tokenizer.json, tokenizer.model, "
            "vocab.json, tiktoken.model)",
        )
    ]


def test_a_stop_token_outside_the_vocabulary_names_generation_config(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    model = copy_of(family_model, tmp_path, "llama")
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    edit_json(model / "generation_config.json", eos_token_id=10**6)
    _, errors = check(tmp_path, model)
    assert errors == [
        (
            "base_model",
            f"{model}/generation_config.json: eos_token_id 1000000 is outside the model's "
            f"vocabulary of {vocab}",
        )
    ]


def test_a_base_problem_stays_under_base_model_with_a_template_set(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    model = copy_of(family_model, tmp_path, "llama")
    edit_json(model / "generation_config.json", eos_token_id=10**6)
    llama3 = FAMILIES / "templates" / "llama3.jinja"
    _, errors = check(tmp_path, model, extra=f"model:\n  chat_template: {llama3}\n")
    assert [key for key, _ in errors] == ["base_model"]


# ---- as a user sees it -------------------------------------------------------------------------


def test_check_through_the_installed_script(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    gpt2 = family_model("gpt2")
    ran = tuneloop("check", project(tmp_path, gpt2))
    ran.assert_input_error("1 error(s)", f"base_model (line 1): {gpt2}: no chat template", *FIXES)
    assert ran.stdout == ""
    assert "chat template: none (completion-mode suites only)" in ran.stderr
