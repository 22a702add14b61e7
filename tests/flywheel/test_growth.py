"""Growth after dedup: new labels counted as the next round's corpus build would keep them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tuneloop.data.corpus import build_corpus
from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import count_new_labels, read_traffic
from tuneloop.flywheel.growth import NO_CORPUS, Growth, count_growth

PING = "Health check: reply with the single word OK if the service is up."
LONG = (
    "Our order service logs show a spike of timeouts between the gateway and the billing "
    "cluster every night at two; the retries pile up and the queue backs up for an hour. "
    "What should we look at first"
)


def exchange(cid: str, t: float, question: str, answer: str = "OK") -> dict:
    return {
        "timestamp": t,
        "request": {"model": "m", "messages": [{"role": "user", "content": question}]},
        "response": {
            "id": cid,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
        },
    }


def feedback(cid: str, t: float, verdict: str = "up", correction: str | None = None) -> dict:
    line = {"type": "feedback", "completion_id": cid, "verdict": verdict, "timestamp": t}
    return line | ({"correction": correction} if correction else {})


def write(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def labelled(cid: str, t: float, question: str, **fb: str) -> list[dict]:
    """An exchange and its label a second later."""
    return [exchange(cid, t, question), feedback(cid, t + 1, **fb)]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    items = [
        {"id": "s1", "messages": [{"role": "user", "content": "What is 3 + 6?"}], "answer": "9"},
        {"id": "s2", "messages": [{"role": "user", "content": "What is 40 + 2?"}], "answer": "42"},
    ]
    return write(tmp_path / "suite.jsonl", items)


def corpus_yaml(tmp_path: Path, *, near: bool = False, suites: tuple[Path, ...] = ()) -> Path:
    """The flywheel corpus config's steps (examples/arith/flywheel_corpus.yaml) on `traffic/`."""
    listed = ", ".join(str(p) for p in suites)
    text = (
        "sources:\n  - {path: traffic, format: openai_chat, name: traffic}\n"
        "filter: {min_score: 0.5, keep_unrated: false}\n"
        f"dedup: {{exact: true, near: {str(near).lower()}}}\n"
        f"decontaminate: {{suites: [{listed}], n: 13}}\n"
    )
    path = tmp_path / "corpus.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def growth(
    tmp_path: Path,
    lines: list[dict],
    *,
    since: float | None = None,
    corpus: Path | None = None,
    trained: Path | None = None,
    suites: tuple[Path, ...] = (),
) -> Growth:
    log = write(tmp_path / "traffic" / "traffic.jsonl", lines)
    traffic = read_traffic([log.parent])
    return count_growth(traffic, since, corpus=corpus, trained_rows=trained, suites=suites)


def test_49_copies_of_one_prompt_are_one_new_label(tmp_path: Path, suite: Path) -> None:
    lines = [x for i in range(49) for x in labelled(f"c{i}", 10 * i, PING)]
    got = growth(tmp_path, lines, corpus=corpus_yaml(tmp_path), suites=(suite,))
    assert got == Growth(labelled=49, trainable=1, removed={"exact_duplicate": 48})


def test_rows_already_trained_on_are_not_new(tmp_path: Path, suite: Path) -> None:
    corpus = corpus_yaml(tmp_path)
    first = labelled("a", 10, PING) + labelled("b", 20, "How do I rotate the API keys?")
    write(tmp_path / "traffic" / "traffic.jsonl", first)
    trained = build_corpus(corpus, tmp_path / "round1", progress=False).sft_path
    later = labelled("c", 100, PING) + labelled("d", 110, "How do I rotate the API keys?  ")
    later += labelled("e", 120, "Which port does the metrics endpoint use?")
    got = growth(tmp_path, first + later, since=50, corpus=corpus, trained=trained)
    assert got == Growth(labelled=3, trainable=1, removed={"already_trained": 2})
    # before the first round every label is a candidate, and the log's copies collapse
    got = growth(tmp_path, first + later, corpus=corpus)
    assert got == Growth(labelled=5, trainable=3, removed={"exact_duplicate": 2})


def test_a_prompt_that_is_a_suite_item_is_contaminated(tmp_path: Path, suite: Path) -> None:
    lines = labelled("a", 10, "what is 3 + 6 ?") + labelled("b", 20, PING)
    # the loop's suite (`suites`) and the corpus config's own are both decontaminated against
    for corpus, suites in (
        (corpus_yaml(tmp_path), (suite,)),
        (corpus_yaml(tmp_path, suites=(suite,)), ()),
    ):
        got = growth(tmp_path, lines, corpus=corpus, suites=suites)
        assert got == Growth(labelled=2, trainable=1, removed={"contaminated": 1})


def test_a_thumbs_down_without_a_correction_is_filtered(tmp_path: Path) -> None:
    lines = labelled("a", 10, "Is the cache warm?", verdict="down")
    lines += labelled("b", 20, "How big is the cache?", verdict="down", correction="2 GiB")
    lines += labelled("c", 30, PING)
    got = growth(tmp_path, lines, corpus=corpus_yaml(tmp_path))
    assert got == Growth(labelled=3, trainable=2, removed={"filter": 1})


def test_near_duplicates_count_once_when_near_dedup_is_on(tmp_path: Path) -> None:
    lines = labelled("a", 10, LONG + "?") + labelled("b", 20, LONG + " tonight?")
    got = growth(tmp_path, lines, corpus=corpus_yaml(tmp_path, near=True))
    assert got == Growth(labelled=2, trainable=1, removed={"near_duplicate": 1})
    got = growth(tmp_path, lines, corpus=corpus_yaml(tmp_path, near=False))
    assert got == Growth(labelled=2, trainable=2, removed={})


def test_a_near_duplicate_of_a_trained_row_is_already_trained(tmp_path: Path) -> None:
    corpus = corpus_yaml(tmp_path, near=True)
    first = labelled("a", 10, LONG + "?")
    write(tmp_path / "traffic" / "traffic.jsonl", first)
    trained = build_corpus(corpus, tmp_path / "round1", progress=False).sft_path
    lines = first + labelled("b", 100, LONG + " tonight?")
    got = growth(tmp_path, lines, since=50, corpus=corpus, trained=trained)
    assert got == Growth(labelled=1, trainable=0, removed={"already_trained": 1})


def test_without_a_corpus_config_prompts_are_deduplicated_and_decontaminated(
    tmp_path: Path, suite: Path
) -> None:
    trained = write(tmp_path / "train.jsonl", [{"prompt": "Which region is primary?"}])
    lines = labelled("a", 10, PING) + labelled("b", 20, PING, verdict="down")
    lines += labelled("c", 30, "What is 40 + 2?") + labelled("d", 40, "which region is PRIMARY?")
    got = growth(tmp_path, lines, trained=trained, suites=(suite,))
    # no filter: the thumbs-down counts, and is the copy of the first
    assert got == Growth(
        labelled=4,
        trainable=1,
        removed={"exact_duplicate": 1, "already_trained": 1, "contaminated": 1},
        note=NO_CORPUS,
    )


def test_a_label_that_makes_no_row_is_counted_apart(tmp_path: Path) -> None:
    no_reply = exchange("a", 10, PING) | {"response": {"id": "a", "choices": []}}
    lines = [no_reply, feedback("a", 11), *labelled("b", 20, "How do I restart the worker?")]
    got = growth(tmp_path, lines, corpus=corpus_yaml(tmp_path))
    assert got == Growth(labelled=2, trainable=1, removed={"no_row": 1})


def test_only_labels_after_since_are_candidates(tmp_path: Path) -> None:
    # an old exchange labelled after `since` is new; a label before it is not
    lines = [exchange("a", 10, PING), exchange("b", 20, "How do I restart the worker?")]
    lines += [feedback("b", 21), feedback("a", 100)]
    got = growth(tmp_path, lines, since=50, corpus=corpus_yaml(tmp_path))
    assert got == Growth(labelled=1, trainable=1, removed={})


def test_a_label_in_a_later_file_joins_its_exchange(tmp_path: Path) -> None:
    write(tmp_path / "traffic" / "traffic-1.jsonl", [exchange("a", 10, PING)])
    got = growth(tmp_path, [feedback("a", 20)], corpus=corpus_yaml(tmp_path))
    assert got == Growth(labelled=1, trainable=1, removed={})


def test_a_corpus_that_reads_no_traffic_makes_no_row(tmp_path: Path) -> None:
    corpus = corpus_yaml(tmp_path)
    write(tmp_path / "elsewhere" / "seed.jsonl", [])
    corpus.write_text(corpus.read_text().replace("path: traffic", "path: elsewhere"))
    got = growth(tmp_path, labelled("a", 10, PING), corpus=corpus)
    assert (got.trainable, got.removed) == (0, {"no_row": 1})
    assert got.note and "reads none of the traffic log's files" in got.note


def test_a_corpus_config_that_does_not_load_names_its_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text("sources: []\nfilter: {min_score: 2}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"corpus\.yaml"):
        growth(tmp_path, labelled("a", 10, PING), corpus=corpus)


def test_edited_inputs_are_read_again(tmp_path: Path, suite: Path) -> None:
    corpus = corpus_yaml(tmp_path)
    lines = labelled("a", 10, "What is 7 + 7?")
    assert growth(tmp_path, lines, corpus=corpus, suites=(suite,)).trainable == 1
    items = [
        {"id": "s3", "messages": [{"role": "user", "content": "What is 7 + 7?"}], "answer": "14"}
    ]
    write(suite, items)
    os.utime(suite, ns=(1, 1))  # a different mtime even on a coarse clock
    assert growth(tmp_path, lines, corpus=corpus, suites=(suite,)).removed == {"contaminated": 1}


def test_the_count_is_what_the_corpus_build_keeps(tmp_path: Path, suite: Path) -> None:
    """Before any round, with every exchange labelled: trainable = the build's sft rows."""
    questions = [PING, "What is 3 + 6?", LONG + "?", LONG + " tonight?", "Is the cache warm?"]
    lines = []
    for i in range(40):
        question = questions[i % len(questions)] if i % 3 else f"How many shards has table {i}?"
        verdict = "down" if i % 7 == 0 else "up"
        lines += labelled(f"c{i}", 10 * i, question, verdict=verdict)
    corpus = corpus_yaml(tmp_path, near=True, suites=(suite,))
    write(tmp_path / "traffic" / "traffic.jsonl", lines)
    built = build_corpus(corpus, tmp_path / "built", progress=False)
    got = growth(tmp_path, lines, corpus=corpus)
    assert got.labelled == count_new_labels(read_traffic([tmp_path / "traffic"]), None).new == 40
    assert got.trainable == built.counts["shuffle"]
    assert set(got.removed) == {"filter", "exact_duplicate", "near_duplicate", "contaminated"}
    assert got.labelled == got.trainable + sum(got.removed.values())
