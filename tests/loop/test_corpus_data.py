"""The corpus in the loop: which output trains each method, and the loop's suites are always
decontaminated against (the corpus build, and a directly given train.data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuneloop.config import LoopConfig
from tuneloop.loop.corpus_data import (
    FILTERED,
    PAIRS_FILTERED,
    REPORT,
    corpus_output,
    decontaminated_given,
    output_problems,
)

from . import fakeloop
from .preflight.test_checks import project  # noqa: F401  (fixture)

LEAK = "What is 7 + 1?"  # item q0007 of fakeloop's suite


def _cfg(tmp_path: Path, corpus: str | None = "corpus.yaml", **sections: Any) -> LoopConfig:
    raw: dict[str, Any] = {
        "base_model": str(tmp_path / "m"),
        "suite": {"path": str(fakeloop.write_suite(tmp_path / "suite.jsonl"))},
        "workdir": str(tmp_path / "work"),
        "data": {"corpus": str(tmp_path / corpus)} if corpus else {},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    (tmp_path / "corpus.yaml").write_text("sources: [{path: log.jsonl}]\n")
    return LoopConfig.model_validate(raw)


def test_the_output_follows_the_method(tmp_path: Path) -> None:
    outputs = {m: corpus_output(_cfg(tmp_path, train={"method": m})) for m in ("sft", "dpo")}
    assert outputs == {"sft": "sft", "dpo": "preference"}
    assert corpus_output(_cfg(tmp_path, train={"method": "grpo"})) == "grpo"
    assert output_problems(_cfg(tmp_path, train={"method": "sft"}, data={"output": "grpo"})) == []


@pytest.mark.parametrize(
    "train, data, corpus, words",
    [
        ({"method": "dpo"}, {"output": "sft"}, "", "does not feed train.method 'dpo'"),
        ({"method": "grpo"}, {"output": "preference"}, "", "set data.output: grpo"),
        ({"method": "dpo"}, {}, "preference: {enabled: false}\n", "never writes it"),
        ({"method": "sft", "data": "t.jsonl"}, {"output": "sft"}, "", "has no effect"),
    ],
)
def test_mismatches_are_refused_by_key(tmp_path, train, data, corpus, words) -> None:
    cfg = _cfg(tmp_path, train=train, data=data)
    (tmp_path / "corpus.yaml").write_text("sources: [{path: log.jsonl}]\n" + corpus)
    ((key, message),) = output_problems(cfg)
    assert key == "data.output" and words in message


def _traffic(tmp_path: Path) -> None:
    def line(i: int, q: str, a: str, verdict: str) -> dict[str, Any]:
        choice = {"index": 0, "message": {"role": "assistant", "content": a}}
        return {
            "request": {"messages": [{"role": "user", "content": q}]},
            "response": {"id": f"r{i}", "choices": [choice]},
            "verdict": verdict,
        }

    lines = [
        line(1, "What is 500 + 2?", "503", "down"),
        line(2, "What is 500 + 2?", "502", "up"),
        line(3, LEAK, "9", "down"),
        {"type": "feedback", "completion_id": "r3", "correction": "8"},
    ]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_dpo_loop_trains_on_the_corpus_preference_pairs(tmp_path, monkeypatch) -> None:
    """The real data phase and train adapter; only `tuneloop.train.run.train` is a stand-in,
    reading what it was handed the way DPO does."""
    from tuneloop.train.data import dpo_rows, read_rows

    _traffic(tmp_path)
    (tmp_path / "corpus.yaml").write_text("sources: [{path: log.jsonl}]\n")  # names no suite
    config = fakeloop.write_config(
        tmp_path, data={"corpus": str(tmp_path / "corpus.yaml")}, train={"method": "dpo"}
    )
    seen = fakeloop.run_with_train_adapter(config, monkeypatch)
    seen["rows"] = dpo_rows(read_rows(seen["data"]))
    assert seen["data"] == tmp_path / "work" / "data" / "preference.jsonl"
    # one pair from the disagreeing votes; the correction's pair asked a loop-suite item
    assert [(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in seen["rows"]] == [
        ("502", "503")
    ]
    prov = json.loads((tmp_path / "work" / "data" / "provenance.json").read_text())
    assert prov["decontamination"][0]["suite"] == str(tmp_path / "suite.jsonl")
    assert prov["decontamination"][0]["preference_pairs_removed"] == ["r3|correction"]


def test_a_direct_train_data_is_filtered_against_the_loop_suite(tmp_path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "What is 500 + 2?"}], "answer": "502"},
        {"messages": [{"role": "user", "content": f"  {LEAK.upper()} "}], "answer": "8"},
        {"prompt": "Tell me: what is seven + one?", "answer": "8"},  # spelled out, inside
    ]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _cfg(tmp_path, corpus=None, train={"data": str(data)})
    folder = tmp_path / "train"
    folder.mkdir()
    out = decontaminated_given(cfg, folder)["data"]
    assert out == folder / FILTERED
    assert out.read_text().splitlines() == [json.dumps(rows[0])]
    report = json.loads((folder / REPORT).read_text())
    assert [r["line"] for r in report["removed"]] == [2, 3] and report["rows"] == 3
    # nothing to remove: the trainer reads the file itself
    data.write_text(json.dumps(rows[0]) + "\n")
    assert decontaminated_given(cfg, folder)["data"] == data


def _pairs(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    pairs = [
        {"prompt": "What is 500 + 2?", "chosen": "502", "rejected": "503"},
        {"prompt": [{"role": "user", "content": LEAK}], "chosen": "8", "rejected": "9"},
        {"prompt": "What is 600 + 3?", "chosen": "603", "rejected": "604"},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    return path, pairs


def test_given_composite_pairs_are_filtered_against_the_loop_suite(tmp_path) -> None:
    path, pairs = _pairs(tmp_path)
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps({"prompt": "What is 500 + 2?", "answer": "502"}) + "\n")
    composite = {"beta": 0.5, "pairs": str(path)}
    cfg = _cfg(
        tmp_path,
        corpus=None,
        train={"method": "composite", "data": str(data), "composite": composite},
    )
    folder = tmp_path / "train"
    folder.mkdir()
    assert decontaminated_given(cfg, folder)["data"] == data  # clean: read as given
    out = decontaminated_given(cfg, folder).get("pairs")
    assert out == folder / PAIRS_FILTERED
    assert [json.loads(x) for x in out.read_text().splitlines()] == [pairs[0], pairs[2]]
    report = json.loads((folder / REPORT).read_text())
    assert report["data"] == str(data) and report["contaminated"] == 0  # train.data's entry
    assert report["pairs"]["path"] == str(path) and report["pairs"]["rows"] == 3
    assert [r["line"] for r in report["pairs"]["removed"]] == [2]
    # allowed: kept and listed; beta 0 or another method: the pairs are not read at all
    allowed = cfg.model_copy(
        update={"train": cfg.train.model_copy(update={"allow_contamination": True})}
    )
    assert decontaminated_given(allowed, folder).get("pairs") == path
    off = cfg.train.composite.model_copy(update={"beta": 0.0})
    assert (
        decontaminated_given(
            cfg.model_copy(update={"train": cfg.train.model_copy(update={"composite": off})}),
            folder,
        ).get("pairs")
        is None
    )


def test_the_train_phase_trains_on_the_filtered_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, pairs = _pairs(tmp_path)
    rows = [{"messages": [{"role": "user", "content": "What is 500 + 2?"}], "answer": "502"}]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train = {
        "method": "composite",
        "data": str(data),
        "composite": {"beta": 0.5, "pairs": str(path)},
    }
    seen = fakeloop.run_with_train_adapter(
        fakeloop.write_config(tmp_path, train=train), monkeypatch
    )
    work = tmp_path / "work" / "train"
    assert seen["settings"].composite.pairs == work / PAIRS_FILTERED
    assert LEAK not in (work / PAIRS_FILTERED).read_text()
    assert json.loads((work / REPORT).read_text())["pairs"]["contaminated"] == 1
    assert "pairs" in seen["state"].phases["train"].inputs  # hashed: edited pairs retrain


def test_tuneloop_check_refuses_dpo_on_chat_rows(project, capsys, monkeypatch) -> None:  # noqa: F811
    from .preflight.test_checks import assert_nothing_written, cli, edit

    _traffic(project)
    (project / "corpus.yaml").write_text("sources: [{path: log.jsonl}]\n")
    text = (project / "loop.yaml").read_text()
    text = edit(text, "  method: sft", "  method: dpo")
    text = edit(text, "  data: train.jsonl", "  max_length: 64")
    text += "data:\n  corpus: corpus.yaml\n  output: sft\n"
    (project / "loop.yaml").write_text(text)
    code, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert code == 2
    assert "data.output (line" in err and "does not feed train.method 'dpo'" in err
    assert_nothing_written(project)


def test_the_restated_output_names_are_the_corpus_builds_own() -> None:
    # corpus_data restates them to keep `tuneloop check` from loading the corpus pipeline
    from tuneloop.data.corpus.pipeline import GRPO_FILE, PREF_FILE, SFT_FILE
    from tuneloop.loop.corpus_data import OUTPUT_FILES

    assert (OUTPUT_FILES["sft"], OUTPUT_FILES["grpo"], OUTPUT_FILES["preference"]) == (
        SFT_FILE,
        GRPO_FILE,
        PREF_FILE,
    )


def test_the_data_phase_bands_by_the_base_it_serves(tmp_path, monkeypatch) -> None:
    """`bands.champion.serve: base`: the data phase serves the round's base with the loop's
    serve settings while it samples, the corpus keeps the prompts by that model's pass rate,
    and the base is an input of the phase (a new base bands again)."""
    import contextlib

    from tests.replay.conftest import FakeTeachers, TeacherServer
    from tuneloop.endpoint import Endpoint

    lines = [
        {
            "request": {"messages": [{"role": "user", "content": q}]},
            "response": {"id": f"r{i}", "choices": [{"index": 0, "message": m}]},
            "answer": a,
            "scorer": "numeric",
        }
        for i, (q, a) in enumerate([("What is 500 + 2?", "502"), ("What is 600 + 3?", "603")])
        for m in [{"role": "assistant", "content": "0"}]
    ]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "corpus.yaml").write_text(
        "sources: [{path: log.jsonl}]\nfilter: {keep_unrated: true}\ngrpo: {scorer: numeric}\n"
        "bands:\n  champion: {serve: base, samples: 3}\n  outputs: [grpo]\n"
        "  edges: [0, 1]\n  keep: [easy, medium]\n"
    )
    server = TeacherServer(FakeTeachers())  # "even" answers right when the sum is even
    served: list[tuple[Any, ...]] = []

    @contextlib.contextmanager
    def serving(model: Any, config: Any, **kw: Any) -> Any:
        served.append((model, config.backend, kw["arm"]))
        yield Endpoint(server.url, "even", None, pid=None)

    monkeypatch.setattr("tuneloop.serving.serving", serving)
    try:
        config = fakeloop.write_config(
            tmp_path,
            data={"corpus": str(tmp_path / "corpus.yaml")},
            train={"method": "grpo"},
            serve={"backend": "embedded"},
            gate={"enabled": False},  # two rounds, one suite: no gate slice to look at twice
        )
        seen = fakeloop.run_with_train_adapter(config, monkeypatch)
        rows = [json.loads(x) for x in seen["data"].read_text().splitlines()]
        # 500 + 2 = 502 is even: always right (kept, easy); 603 never (hard, dropped)
        assert [(r["messages"][0]["content"], r["band"], r["pass_rate"]) for r in rows] == [
            ("What is 500 + 2?", "easy", 1.0)
        ]
        assert served == [(tmp_path / "base", "embedded", "pre")]
        assert server.state.calls_for("even") == 6  # 2 prompts × 3 samples
        state = json.loads((tmp_path / "work" / "state.json").read_text())
        assert state["phases"]["data"]["notes"]["banded_by"]["model"] == str(tmp_path / "base")
        # a new base is a new champion: its pass rates are sampled again
        (tmp_path / "base" / "weights.bin").write_bytes(b"new-weights")
        fakeloop.run_with_train_adapter(config, monkeypatch)
        assert len(served) == 2 and server.state.calls_for("even") == 12
    finally:
        server.stop()


def test_a_given_warmup_file_is_filtered_against_the_loop_suite(tmp_path) -> None:
    from tuneloop.loop.corpus_data import WARMUP_FILTERED, decontaminated_given

    rows = [
        {"messages": [{"role": "user", "content": "What is 500 + 2?"}], "answer": "502"},
        {"messages": [{"role": "user", "content": LEAK}], "answer": "8"},
    ]
    warm = tmp_path / "warm.jsonl"
    warm.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train = {"method": "grpo", "sft_warmup_steps": 5, "sft_warmup_data": str(warm)}
    folder = tmp_path / "train"
    folder.mkdir()
    given = decontaminated_given(_cfg(tmp_path, train=train), folder)
    assert given == {"sft_warmup_data": folder / WARMUP_FILTERED}
    assert given["sft_warmup_data"].read_text().splitlines() == [json.dumps(rows[0])]
    report = json.loads((folder / REPORT).read_text())
    assert report["sft_warmup_data"]["path"] == str(warm)
    assert [r["line"] for r in report["sft_warmup_data"]["removed"]] == [2]
    # no warm-up steps: the file is not read, so not matched either
    idle = _cfg(tmp_path, train={**train, "sft_warmup_steps": 0})
    assert decontaminated_given(idle, tmp_path / "nowhere") == {}


@pytest.mark.parametrize("fmt", ["claude_code", "auto"])
def test_the_replay_ingests_an_applications_own_session(tmp_path: Path, fmt: str) -> None:
    from tuneloop.loop.corpus_data import replay_traces
    from tuneloop.loop.layout import RunLayout
    from tuneloop.records.trace import Trace

    session = Path(__file__).parents[1] / "data" / "fixtures" / "claude_code_session.jsonl"
    cfg = _cfg(tmp_path, replay={"traces": str(session), "traces_format": fmt})
    folder = tmp_path / "replay"
    out = replay_traces(cfg, RunLayout(tmp_path / "work"), folder)
    assert out == folder / "ingested_traces.jsonl"
    traces = [Trace.model_validate(json.loads(line)) for line in out.read_text().splitlines()]
    assert traces and all(t.source_file == str(session) for t in traces)
    assert "sk-ant-api03" not in out.read_text()  # scrubbed as `tuneloop ingest` scrubs
    plain = _cfg(tmp_path, replay={"traces": str(out)})
    assert replay_traces(plain, RunLayout(tmp_path / "work"), folder) == out
