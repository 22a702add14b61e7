"""Benchmark: the grammar engine behind `response_format` and forced tool calls — llguidance
(what tuneloop uses, `serve/embedded/constrain.py`) against xgrammar (vLLM's other
structured-output backend) — on one JSON schema, per vocabulary:

- `demo`: examples/arith/model's byte-level BPE tokenizer (330 tokens);
- `tekken`: Mistral's tekken vocabulary (131,072 byte tokens), from the `mistral_common`
  package's data (the vLLM environment has it: `scripts/setup --vllm`), no download.

Run: `.venv-vllm/bin/python benchmarks/constrained.py [--runs 5] [--tekken PATH]`, after
`scripts/setup --bench`. xgrammar is not a dependency of tuneloop and is not in .venv: it
declares triton (1 GB, with no CPU backend), so it lives in the vLLM environment, which has
llguidance, torch, transformers and mistral_common too (this script imports nothing of
tuneloop's). Without xgrammar or the Tekken data it exits 2 before measuring. For each
engine it prints the one-time tokenizer build, the first mask and the first whole answer
(lazily built tables are paid there), the schema compile, the mask cost per token over the
answer (median of `--runs` more), and a second, new schema from compile to last token —
what a server pays per client that brings its own schema. One thread (`torch.set_num_threads(1)`).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from peers import SETUP, refuse, require  # benchmarks/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "integer"},
        "why": {"type": "string", "maxLength": 40},
        "tags": {"type": "array", "items": {"enum": ["math", "text", "other"]}},
    },
    "required": ["answer", "why", "tags"],
    "additionalProperties": False,
}
TARGET = b'{"answer":15,"why":"adding the two numbers gives it","tags":["math","other"]}'
SECOND = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"}}}
SECOND_TARGET = b'{"name":"abc def","n":12.5}'


def tekken_vocab(path: Path) -> tuple[list[bytes], int]:
    data = json.loads(path.read_text())
    special = data["config"]["default_num_special_tokens"]
    size = data["config"]["default_vocab_size"] - special
    tokens = [b"<special%d>" % i for i in range(special)]
    tokens += [base64.b64decode(v["token_bytes"]) for v in data["vocab"][:size]]
    return tokens, special


def demo_vocab() -> tuple[list[bytes], int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ROOT / "examples" / "arith" / "model")
    table = bytes_to_unicode()
    inverse = {v: k for k, v in table.items()}
    tokens = []
    for i in range(len(tok)):
        piece = tok.convert_ids_to_tokens(i)
        special = i in tok.all_special_ids
        tokens.append(piece.encode() if special else bytes(inverse[c] for c in piece))
    return tokens, 3


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte ↔ printable-character table (byte-level BPE vocabularies use it)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, extra = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars), strict=True))


def tokenize(tokens: list[bytes], special: int, text: bytes) -> list[int]:
    """Greedy longest match over the vocabulary (a realistic token sequence for `text`)."""
    index = {t: i for i, t in enumerate(tokens) if i >= special}
    ids, at = [], 0
    while at < len(text):
        for size in range(min(16, len(text) - at), 0, -1):
            if text[at : at + size] in index:
                ids.append(index[text[at : at + size]])
                at += size
                break
        else:
            raise ValueError(f"byte {text[at]} is not in the vocabulary")
    return ids


def timed(fn: Any) -> tuple[Any, float]:
    began = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - began


def measured(
    built: dict[str, float],
    *,
    fresh: Callable[[], Any],
    first_mask: Callable[[Any], Any],
    walk: Callable[[Any], None],
    new_schema: Callable[[], None],
    per: int,
    runs: int,
) -> dict[str, float]:
    """An engine's figures: its first mask and whole first answer on a fresh matcher (what
    is built lazily is paid there), the median cost per token over `runs` more answers, and
    a new schema from compile to last token."""
    _, first_mask_s = timed(lambda: first_mask(fresh()))
    _, first_answer_s = timed(lambda: walk(fresh()))
    per_token = [timed(lambda: walk(fresh()))[1] / per for _ in range(runs)]
    _, new_s = timed(new_schema)
    return {
        **built,
        "first_mask_s": first_mask_s,
        "first_answer_s": first_answer_s,
        "per_token_s": statistics.median(per_token),
        "new_schema_s": new_s,
    }


def llguidance_arm(tokens: list[bytes], special: int, runs: int) -> dict[str, float]:
    import llguidance
    import llguidance.torch as llt

    byte_id = {t[0]: i for i, t in reversed(list(enumerate(tokens))) if len(t) == 1}

    class Vocab:
        eos_token_id, bos_token_id = 2, 1
        special_token_ids = list(range(special))

        def __init__(self) -> None:
            self.tokens = tokens

        def __call__(self, text: str | bytes) -> list[int]:
            data = text if isinstance(text, bytes) else text.encode()
            return [byte_id[b] for b in data]

    built, build_s = timed(lambda: llguidance.LLTokenizer(llguidance.TokenizerWrapper(Vocab())))
    grammar, compile_s = timed(lambda: llguidance.LLMatcher.grammar_from_json_schema(SCHEMA))
    ids, second_ids = tokenize(tokens, special, TARGET), tokenize(tokens, special, SECOND_TARGET)
    mask = llt.allocate_token_bitmask(1, len(tokens))
    logits = torch.zeros(1, len(tokens))

    def walk(matcher: Any, sequence: list[int]) -> None:
        for token in sequence:
            llt.fill_next_token_bitmask(matcher, mask, 0)
            llt.apply_token_bitmask_inplace(logits, mask)
            assert matcher.consume_token(token), matcher.get_error()

    def new_schema() -> None:
        second = llguidance.LLMatcher.grammar_from_json_schema(SECOND)
        walk(llguidance.LLMatcher(built, second), second_ids)

    return measured(
        {"tokenizer_s": build_s, "compile_s": compile_s},
        fresh=lambda: llguidance.LLMatcher(built, grammar),
        first_mask=lambda m: llt.fill_next_token_bitmask(m, mask, 0),
        walk=lambda m: walk(m, ids),
        new_schema=new_schema,
        per=len(ids),
        runs=runs,
    )


def xgrammar_arm(tokens: list[bytes], special: int, runs: int) -> dict[str, float]:
    import xgrammar as xgr

    info, build_s = timed(
        lambda: xgr.TokenizerInfo(
            tokens, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=[2]
        )
    )
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compiled, compile_s = timed(lambda: compiler.compile_json_schema(json.dumps(SCHEMA)))
    ids, second_ids = tokenize(tokens, special, TARGET), tokenize(tokens, special, SECOND_TARGET)
    mask = xgr.allocate_token_bitmask(1, len(tokens))
    logits = torch.zeros(1, len(tokens))

    def walk(matcher: Any, sequence: list[int]) -> None:
        for token in sequence:
            matcher.fill_next_token_bitmask(mask)
            xgr.apply_token_bitmask_inplace(logits, mask)
            assert matcher.accept_token(token)

    def new_schema() -> None:
        walk(xgr.GrammarMatcher(compiler.compile_json_schema(json.dumps(SECOND))), second_ids)

    return measured(
        {"tokenizer_s": build_s, "compile_s": compile_s},
        fresh=lambda: xgr.GrammarMatcher(compiled),
        first_mask=lambda m: m.fill_next_token_bitmask(mask),
        walk=lambda m: walk(m, ids),
        new_schema=new_schema,
        per=len(ids),
        runs=runs,
    )


def find_tekken(given: Path | None) -> Path | None:
    if given is not None:
        return given
    found = sorted(ROOT.glob(".venv*/lib/python*/site-packages/mistral_common/data/tekken_*.json"))
    return found[-1] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tekken", type=Path, default=None)
    args = parser.parse_args()
    how = f"{SETUP}` and run this with `.venv-vllm/bin/python benchmarks/constrained.py"
    require("xgrammar", how=how)
    tekken = find_tekken(args.tekken)
    if tekken is None:
        refuse("mistral_common's Tekken data is not found (or give --tekken PATH)", how)
    torch.set_num_threads(1)
    vocabularies = {"demo": demo_vocab(), "tekken": tekken_vocab(tekken)}
    for name, (tokens, special) in vocabularies.items():
        print(f"\n{name}: {len(tokens):,} tokens")
        results = {
            "llguidance": llguidance_arm(tokens, special, args.runs),
            "xgrammar": xgrammar_arm(tokens, special, args.runs),
        }
        for engine, r in results.items():
            print(
                f"  {engine:10s} tokenizer {r['tokenizer_s'] * 1e3:8.1f} ms   first mask "
                f"{r['first_mask_s'] * 1e3:6.1f} ms   first answer "
                f"{r['first_answer_s'] * 1e3:8.1f} ms   compile {r['compile_s'] * 1e3:7.1f} ms   "
                f"per token {r['per_token_s'] * 1e3:6.3f} ms   new schema "
                f"{r['new_schema_s'] * 1e3:7.1f} ms"
            )
        ll, xg = results["llguidance"], results["xgrammar"]
        print(
            f"  xgrammar / llguidance: per token {xg['per_token_s'] / ll['per_token_s']:.2f}x, "
            f"new schema {xg['new_schema_s'] / ll['new_schema_s']:.1f}x"
        )


if __name__ == "__main__":
    main()
