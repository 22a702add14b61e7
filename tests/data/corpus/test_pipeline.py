import json
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.data.conftest import ARITH, exchange, write_jsonl
from tuneloop.data.corpus import build_corpus, load_corpus_config
from tuneloop.errors import InputError
from tuneloop.records import CorpusProvenance, read_record

from .test_bands import make_log

FAKE_KEY = "sk-proj-TUNELOOPfake0000KEY1111notreal2222"


@pytest.fixture(scope="module")
def arith_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    return build_corpus(ARITH / "corpus.yaml", out, progress=False), out


def test_arith_example_end_to_end(arith_build):
    result, out = arith_build
    prov = json.loads(result.provenance_path.read_text())
    src = prov["sources"][0]
    assert src["ingested"] + src["rejected"] == src["lines_read"] and src["rejected"] == 2
    counts = result.counts
    assert (
        counts["traces"] > counts["filter"] > counts["exact_dedup"] > counts["decontaminate"] > 500
    )
    report = prov["decontamination"][0]
    assert report["rows_removed"] == 6  # exactly the planted leaks (make_traces.LEAKS)
    # Short items are matched whole: `ngram_k` with k their own length (< n = 13).
    rules = {m["rule"] for r in report["removed"] for m in r["matches"]}
    assert "exact_prompt" in rules
    assert all(r == "exact_prompt" or 0 < int(r.removeprefix("ngram_")) <= 13 for r in rules)
    assert prov["scrubbed"]["secret"] > 0 and prov["outputs"]["sft.jsonl"]
    assert result.preference_path is not None


def test_every_ingested_trace_is_written_scrubbed_for_the_replay(arith_build):
    from tuneloop.records import iter_jsonl, parse_record
    from tuneloop.records.trace import Trace

    result, out = arith_build
    path = out / "traces.jsonl"
    traces = [parse_record(obj, Trace, f"{path}:{n}") for n, obj in iter_jsonl(path)]
    assert len(traces) == result.counts["traces"]
    assert FAKE_KEY not in path.read_text()
    prov = read_record(result.provenance_path, CorpusProvenance)
    assert "traces.jsonl" in prov.outputs
    # removals are reproducible only with the same sketch: provenance names it
    assert prov.near_dedup == {
        "sketch": "rensa R-MinHash",
        "rensa": version("rensa"),
        "algorithm_version": 2,
        "seed": 1,
        "bands": [9, 13],
    }


def test_planted_key_and_suite_items_never_reach_an_output(arith_build):
    result, out = arith_build
    suite_prompts = {
        json.loads(line)["messages"][0]["content"] for line in (ARITH / "suite.jsonl").open()
    }
    for path in out.iterdir():
        text = path.read_text()
        assert FAKE_KEY not in text and "jane.doe@example.com" not in text, path.name
    for line in result.sft_path.open():
        row = json.loads(line)
        assert set(row) == {"messages", "source", "source_id"}
        assert row["messages"][-1]["role"] == "assistant"
        assert row["messages"][0]["content"] not in suite_prompts


def test_build_is_deterministic(arith_build, tmp_path):
    result, _ = arith_build
    again = build_corpus(ARITH / "corpus.yaml", tmp_path, progress=False)
    assert again.sft_path.read_bytes() == result.sft_path.read_bytes()


def test_small_config_every_step(tmp_path, tiny_suite):
    lines = [
        exchange(1, "What is 3 + 6?", "9", "up"),  # leaked suite item
        exchange(2, "What is 5 + 5?", "10", "up"),
        exchange(3, "what is 5+5 ?", "10", "up"),  # exact duplicate after normalization
        exchange(4, "What is 7 + 7?", "15", "down"),  # filtered, but a preference pair with 5
        exchange(5, "What is 7 + 7?", "14", "up"),
        exchange(6, "What is 8 + 1?", "9"),  # unrated
        {"messages": [{"role": "user", "content": "no reply"}], "verdict": "up"},
    ]
    write_jsonl(tmp_path / "log.jsonl", lines)
    log = make_log(tmp_path / "eval", tiny_suite, {"q2": [1, 1]})
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources:\n  - {path: log.jsonl, name: prod}\n"
        "decontaminate: {suites: [suite.jsonl]}\n"
        "filter: {keep_unrated: true}\n"
        f"bands: {{sample_log: {log}, keep: [unknown]}}\n"
    )
    result = build_corpus(cfg, tmp_path / "out", progress=False)
    rows = [json.loads(line) for line in result.sft_path.open()]
    assert sorted(r["source_id"] for r in rows) == ["r2", "r5", "r6"]
    assert all(r["band"] == "unknown" for r in rows)
    assert result.counts == {
        "traces": 7,
        "rows": 6,
        "filter": 5,
        "exact_dedup": 4,
        "near_dedup": 4,
        "decontaminate": 3,
        "bands": 3,
        "shuffle": 3,
    }
    pairs = [json.loads(line) for line in result.preference_path.open()]
    assert [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs] == [
        ("14", "15")
    ]
    removed = [json.loads(line) for line in (tmp_path / "out" / "removed.jsonl").open()]
    assert {r["step"] for r in removed} == {"rows", "filter", "exact_dedup", "decontaminate"}


def test_config_errors_name_the_yaml_path(tmp_path):
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources:\n  - path: a.jsonl\n    formt: openai_chat\ndedup:\n  threshold: 1.5\n"
    )
    with pytest.raises(InputError) as err:
        load_corpus_config(cfg)
    msg = str(err.value)
    assert "sources.0.formt (line 3): unknown key (did you mean 'format'?)" in msg
    assert "dedup.threshold (line 5)" in msg


def test_relative_paths_resolve_against_the_config(tmp_path):
    shutil.copy(ARITH / "corpus.yaml", tmp_path / "corpus.yaml")
    cfg = load_corpus_config(tmp_path / "corpus.yaml")
    assert cfg.sources[0].path == (tmp_path / "traces" / "production.jsonl").resolve()
    assert cfg.out_dir == (tmp_path / "corpus").resolve()


def test_missing_inputs_are_listed_by_key_before_any_work(tmp_path):
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text("sources: [{path: nope.jsonl}]\ndecontaminate: {suites: [gone.jsonl]}\n")
    with pytest.raises(InputError) as err:
        build_corpus(cfg, tmp_path / "out", progress=False)
    assert "sources.0.path:" in str(err.value) and "decontaminate.suites.0:" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_agent_traces_keep_tool_calls_in_order_and_lose_no_secret(tmp_path):
    fixtures = Path(__file__).parents[1] / "fixtures"
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        f"sources:\n"
        f"  - {{path: {fixtures / 'openai_proxy.jsonl'}, format: openai_chat, name: api}}\n"
        f"  - {{path: {fixtures / 'claude_code_session.jsonl'}, format: claude_code, name: cc}}\n"
        "filter: {min_score: null, keep_unrated: true}\n"
    )
    result = build_corpus(cfg, tmp_path / "out", progress=False)
    prov = json.loads(result.provenance_path.read_text())
    counted = [
        s["ingested"] + s["rejected"] + sum(s.get("skipped", {}).values()) for s in prov["sources"]
    ]
    assert [(s["lines_read"], n) for s, n in zip(prov["sources"], counted, strict=True)] == [
        (12, 12),
        (26, 26),
    ]
    rows = {r["source_id"]: r for r in map(json.loads, result.sft_path.open())}
    main = rows["6f1c2d3e-aaaa-4bbb-8ccc-123456789abc"]["messages"]
    calls = [c["id"] for m in main for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in main if m["role"] == "tool"]
    assert calls == answered == ["toolu_01", "toolu_02", "toolu_03"]
    assert main[-1]["role"] == "assistant"
    for path in (tmp_path / "out").iterdir():
        text = path.read_text()
        for secret in ("sk-ant-api03-FAKE", "sk-proj-abcDEF", "ops@example.org", "10.20.30.40"):
            assert secret not in text, (path.name, secret)


def _grpo_log(tmp_path):
    with_ref = exchange(1, "What is 12 + 30?", "41", "down")
    with_ref |= {"reference": 42, "scorer": "numeric", "scorer_args": {"abs_tol": 0.5}}
    leaked = exchange(2, "What is 3 + 6?", "9", "up") | {"answer": "9"}  # a suite item
    lines = [
        with_ref,
        leaked,
        exchange(3, "What is 7 + 7?", "15"),
        {"type": "feedback", "completion_id": "r3", "verdict": "down", "correction": "14"},
        exchange(4, "what is 7+7 ?", "14", "up"),  # the same prompt, accepted: the correction wins
        exchange(5, "What is 2 + 2?", "4", "up"),  # accepted
        exchange(6, "What is 9 + 9?", "17", "down"),  # no reference, not accepted
    ]
    return write_jsonl(tmp_path / "log.jsonl", lines)


def test_grpo_prompt_set_keeps_references_scorers_and_origins(tmp_path, tiny_suite):
    _grpo_log(tmp_path)
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources: [{path: log.jsonl, name: prod}]\n"
        "decontaminate: {suites: [suite.jsonl]}\n"
        "grpo: {scorer: numeric, accept_min_score: 1.0}\n"
    )
    result = build_corpus(cfg, tmp_path / "out", progress=False)
    rows = {r["id"]: r for r in map(json.loads, result.grpo_path.open())}
    assert sorted(rows) == ["r1", "r3", "r5"]
    assert rows["r1"] == {
        "id": "r1",
        "messages": [{"role": "user", "content": "What is 12 + 30?"}],
        "answer": "42",
        "scorer": "numeric",
        "scorer_args": {"abs_tol": 0.5},
        "source": "prod",
        "origin": "reference",
    }
    assert (rows["r3"]["answer"], rows["r3"]["origin"]) == ("14", "correction")
    assert (rows["r5"]["answer"], rows["r5"]["origin"], rows["r5"]["scorer"]) == (
        "4",
        "accepted",
        "numeric",
    )
    prov = read_record(result.provenance_path, CorpusProvenance)
    assert prov.grpo.counts == {"candidates": 5, "dedup": 4, "decontaminate": 3}
    assert prov.grpo.by_origin == {"reference": 1, "correction": 1, "accepted": 1}
    assert prov.decontamination[0].grpo_prompts_removed == ["r2"]
    # the SFT rows keep their reference too
    sft = {r["source_id"]: r for r in map(json.loads, result.sft_path.open())}
    assert sft["r3"]["reference"] == {"answer": "14", "origin": "correction"}
    # and the trainer reads the set as GRPO prompt rows
    from tuneloop.train.data import grpo_rows, read_rows

    assert len(grpo_rows(read_rows(result.grpo_path))) == 3


def test_champion_bands_keep_the_informative_prompts(tmp_path, tiny_suite, monkeypatch):
    _grpo_log(tmp_path)
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources: [{path: log.jsonl}]\n"
        "grpo: {accept_min_score: 1.0}\n"
        "bands:\n  champion: {base_url: 'http://127.0.0.1:9/v1', model: champ, samples: 4}\n"
        "  edges: [0, 1]\n  keep: [medium]\n  outputs: [grpo]\n"
    )
    answers = {"What is 12 + 30?": ["42", "41", "42", "0"], "What is 7 + 7?": ["14"] * 4}

    async def fake(prompts, samples, sample, default_scorer):  # the endpoint, answered here
        async def reply(messages, seed):
            return answers.get(messages[-1]["content"], ["x"] * 4)[seed]

        return await real(prompts, samples, reply, default_scorer)

    from tuneloop.data.corpus import champion_rates

    real = champion_rates.pass_rates
    monkeypatch.setattr(champion_rates, "pass_rates", fake)
    result = build_corpus(cfg, tmp_path / "out", progress=False)
    rows = [json.loads(line) for line in result.grpo_path.open()]
    # 12 + 30: 2 of 4 right (kept); 7 + 7: always right, 3 + 6 and 2 + 2: never (dropped)
    assert [(r["id"], r["band"], r["pass_rate"]) for r in rows] == [("r1", "medium", 0.5)]
    assert all("band" not in json.loads(line) for line in result.sft_path.open())


def test_champion_serve_base_is_the_loops_to_resolve(tmp_path, tiny_suite, monkeypatch):
    _grpo_log(tmp_path)
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources: [{path: log.jsonl}]\n"
        "grpo: {accept_min_score: 1.0}\n"
        "bands:\n  champion: {serve: base, samples: 2}\n  edges: [0, 1]\n  keep: [medium]\n"
    )
    # built alone, nothing serves the base: refused before any work, naming the key
    with pytest.raises(InputError, match=r"bands\.champion\.serve: base .*\(tuneloop run\)"):
        build_corpus(cfg, tmp_path / "alone", progress=False)
    assert not (tmp_path / "alone").exists()

    asked = []

    class Client:  # the endpoint the loop passes, answered here
        def __init__(self, base_url, **kw):
            asked.append((base_url, kw["api_key"]))

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return None

        async def complete(self, payload, chat):
            asked.append(payload["model"])
            right = payload["messages"][-1]["content"] == "What is 12 + 30?" and payload["seed"]
            return type("Reply", (), {"text": "42" if right else "0"})()

    from tuneloop.client import completions
    from tuneloop.endpoint import Endpoint

    monkeypatch.setattr(completions, "OpenAIClient", Client)
    served = Endpoint("http://127.0.0.1:8123/v1", "base-model", "k", pid=None)
    result = build_corpus(cfg, tmp_path / "out", progress=False, champion=served)
    rows = [json.loads(line) for line in result.grpo_path.open()]
    assert [(r["id"], r["pass_rate"]) for r in rows] == [("r1", 0.5)]
    assert asked[0] == ("http://127.0.0.1:8123/v1", "k")
    assert set(asked[1:]) == {"base-model"}


@pytest.mark.parametrize(
    ("champion", "message"),
    [
        ("{serve: base, base_url: 'http://h/v1', model: m}", "either base_url"),
        ("{samples: 2}", "either base_url"),
        ("{base_url: 'http://h/v1'}", "base_url needs model"),
    ],
)
def test_champion_names_one_endpoint(tmp_path, champion, message):
    from tuneloop.data.corpus import load_corpus_config

    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(f"sources: [{{path: log.jsonl}}]\nbands:\n  champion: {champion}\n")
    with pytest.raises(InputError, match=rf"bands\.champion.*{message}"):
        load_corpus_config(cfg)
