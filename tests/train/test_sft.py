from __future__ import annotations

from pathlib import Path

from tuneloop.train.sft import tokenize_with_mask


def test_only_assistant_tokens_are_trained(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "6"},
    ]
    enc = tokenize_with_mask(tok, msgs, max_length=512)
    kept = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    # Each reply's text plus the template's end-of-turn marker, not the newline after it.
    assert tok.decode(kept) == "4<|im_end|>6<|im_end|>"
    dropped = tok.decode(
        [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if not m]
    )
    assert "What is 2 + 2?" in dropped and "Be brief." in dropped and "assistant" in dropped


def test_trl_turns_the_mask_into_minus_100_labels(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    from tuneloop.train.common import load_model, load_tokenizer
    from tuneloop.train.data import read_rows, sft_rows
    from tuneloop.train.settings import TrainSettings
    from tuneloop.train.sft import build_sft_trainer

    tok = load_tokenizer(tiny_model)
    trainer = build_sft_trainer(
        load_model(tiny_model),
        tok,
        sft_rows(read_rows(prompts)),
        TrainSettings(batch_size=2),
        out_dir=tmp_path,
        nproc=1,
        steps=1,
    )
    row = trainer.train_dataset[1]
    labels, ids = row["labels"], row["input_ids"]
    kept = [i for i, lab in zip(ids, labels, strict=True) if lab != -100]
    assert tok.decode(kept) == "8<|im_end|>"
    assert all(lab in (-100, i) for i, lab in zip(ids, labels, strict=True))
