"""The traffic log and feedback route, installed on a plain FastAPI app (as the embedded server
installs them): what reaches the disk, rotation, failure, restart, and the ingester reading it."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tuneloop.data.ingest import ingest_files
from tuneloop.serve.traffic import TrafficLog, install_traffic
from tuneloop.serve.traffic import log as traffic_log

from ..upstreams import fake_upstream

SECRET = "sk-proj-abcDEF0123456789ghiJKL0123"


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture
def log(tmp_path: Path) -> Any:
    log = TrafficLog(tmp_path / "traffic")
    yield log
    log.close()


def client_for(log: TrafficLog, **kwargs: Any) -> httpx.AsyncClient:
    app = fake_upstream("m")
    install_traffic(app, log, **kwargs)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_logged_traffic_is_ingested_with_feedback_joined(log: TrafficLog) -> None:
    async with client_for(log) as client:
        first = (await client.post("/v1/chat/completions", json=chat("2+2?"))).json()
        second = (await client.post("/v1/chat/completions", json=chat("3+3?"))).json()
        async with client.stream(
            "POST", "/v1/chat/completions", json=chat("4+4?", stream=True)
        ) as streamed:
            body = (await streamed.aread()).decode()
        stream_id = json.loads(body.split("\n")[0][len("data: ") :])["id"]
        for payload in (
            {"completion_id": first["id"], "verdict": "up"},
            {"completion_id": second["id"], "verdict": "down", "correction": "6"},
            {"completion_id": stream_id, "score": 0.75},
        ):
            answer = await client.post("/v1/feedback", json=payload)
            assert answer.status_code == 200, answer.text
    log.flush()
    traces, rejects, report = ingest_files("openai_chat", [log.path])
    assert rejects == [] and report.lines_read == 6 and report.ingested == 6
    by_id = {t.source_id: t for t in traces}
    assert by_id[first["id"]].feedback.verdict == "up"
    assert by_id[second["id"]].feedback.correction == "6"
    assert by_id[second["id"]].feedback.score == 0.0
    assert by_id[stream_id].feedback.score == 0.75
    assert by_id[stream_id].messages[-1].content == "m: 4+4?"  # the chunks joined


async def test_a_secret_in_a_prompt_never_reaches_the_disk(log: TrafficLog) -> None:
    async with client_for(log) as client:
        reply = await client.post("/v1/chat/completions", json=chat(f"key {SECRET} ada@x.org"))
        assert SECRET in reply.text  # the client gets the answer untouched
        await client.post(
            "/v1/feedback",
            json={"completion_id": reply.json()["id"], "verdict": "down", "correction": SECRET},
        )
    log.flush()
    text = log.path.read_text()
    assert SECRET not in text and "ada@x.org" not in text
    assert "<SECRET>" in text and "<EMAIL>" in text
    assert log.health()["scrubbed"]["secret"] == 3  # prompt, echoed answer, correction


async def test_unknown_feedback_id_is_a_404_and_recorded(log: TrafficLog) -> None:
    async with client_for(log) as client:
        answer = await client.post("/v1/feedback", json={"completion_id": "nope", "verdict": "up"})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["type"] == "not_found_error" and error["code"] == "completion_not_found"
    assert "nope" in error["message"]
    log.flush()
    (refused,) = lines(log.dir / "rejects" / "feedback.jsonl")
    assert refused["body"]["completion_id"] == "nope" and "unknown" in refused["reason"]
    assert log.health()["counts"]["feedback_rejected"] == 1
    assert not log.path.read_text()  # nothing went into the traffic file


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"completion_id": "x", "verdict": "maybe"}, "verdict"),
        ({"completion_id": "x", "score": 1.5}, "score"),
        ({"completion_id": "x"}, None),
        ({"completion_id": "x", "verdict": "up", "comment": "hi"}, "comment"),
        ({"verdict": "up"}, "completion_id"),
    ],
)
async def test_bad_feedback_bodies_are_400s(
    log: TrafficLog, payload: dict[str, Any], param: str | None
) -> None:
    async with client_for(log) as client:
        answer = await client.post("/v1/feedback", json=payload)
        garbage = await client.post("/v1/feedback", content=b"{not json")
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert garbage.status_code == 400


async def test_feedback_needs_the_api_key_when_one_is_set(log: TrafficLog) -> None:
    async with client_for(log, api_key="k") as client:
        cid = (await client.post("/v1/chat/completions", json=chat("hi"))).json()["id"]
        body = {"completion_id": cid, "verdict": "up"}
        assert (await client.post("/v1/feedback", json=body)).status_code == 401
        ok = await client.post("/v1/feedback", json=body, headers={"authorization": "Bearer k"})
        assert ok.status_code == 200


async def test_an_unwritable_log_dir_shows_on_health(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    log = TrafficLog(tmp_path / "file" / "traffic")
    async with client_for(log) as client:
        served = await client.post("/v1/chat/completions", json=chat("hi"))
        health = (await client.get("/health")).json()
        feedback = await client.post(
            "/v1/feedback", json={"completion_id": served.json()["id"], "verdict": "up"}
        )
    log.close()
    assert served.status_code == 200  # serving goes on; the log's failure is reported
    assert health["status"] == "ok" and health["model"] == "m"  # the app's own fields kept
    assert health["traffic"]["ok"] is False
    assert "file" in health["traffic"]["error"] and "not a folder" in health["traffic"]["error"]
    assert health["traffic"]["counts"]["lost"] == 1
    assert feedback.status_code == 503


async def test_a_full_disk_stops_the_log_without_tearing_a_line(
    log: TrafficLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with client_for(log) as client:
        await client.post("/v1/chat/completions", json=chat("before"))
        log.flush()
        real_write = os.write

        def half_then_full(fd: int, data: bytes) -> int:
            real_write(fd, data[: len(data) // 2])
            return len(data) // 2  # a short write: what a filling disk does

        monkeypatch.setattr(traffic_log.os, "write", half_then_full)
        await client.post("/v1/chat/completions", json=chat("during"))
        log.flush()
        monkeypatch.setattr(traffic_log.os, "write", real_write)
        await client.post("/v1/chat/completions", json=chat("after"))
        health = (await client.get("/health")).json()["traffic"]
    assert health["ok"] is False and "disk is full" in health["error"]
    assert health["counts"]["lost"] == 2 and health["counts"]["exchanges"] == 1
    (only,) = lines(log.path)  # the half-written line was cut away
    assert only["request"]["messages"][0]["content"] == "before"


async def test_rotation_keeps_every_line_whole(tmp_path: Path) -> None:
    log = TrafficLog(tmp_path, max_bytes=2000)
    async with client_for(log) as client:
        for i in range(30):
            await client.post("/v1/chat/completions", json=chat(f"question {i}"))
    log.close()
    rotated = sorted(tmp_path.glob("traffic-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(rotated) >= 5
    files = [*rotated, log.path]
    assert all(p.stat().st_size <= 2000 for p in files)
    asked = [row["request"]["messages"][0]["content"] for p in files for row in lines(p)]
    assert asked == [f"question {i}" for i in range(30)]  # none lost, none torn, in order


async def test_a_restarted_log_accepts_feedback_for_completions_on_disk(tmp_path: Path) -> None:
    first = TrafficLog(tmp_path, max_bytes=1500)
    async with client_for(first) as client:
        ids = [
            (await client.post("/v1/chat/completions", json=chat(f"q{i}"))).json()["id"]
            for i in range(10)
        ]
    first.close()
    assert list(tmp_path.glob("traffic-*.jsonl"))  # some ids are in rotated files
    second = TrafficLog(tmp_path)
    async with client_for(second) as client:
        for cid in ids:
            answer = await client.post("/v1/feedback", json={"completion_id": cid, "score": 1})
            assert answer.status_code == 200
    second.close()


def test_the_index_is_bounded(tmp_path: Path) -> None:
    log = TrafficLog(tmp_path, index_size=3)
    for i in range(5):
        log.record_exchange(chat("x"), {"id": f"c{i}", "choices": []})
    assert [log.knows(f"c{i}") for i in range(5)] == [False, False, True, True, True]
    assert log.knows("c4#1") and not log.knows("c1#0")  # a choice of a known completion
    log.close()
    reopened = TrafficLog(tmp_path, index_size=2)
    assert [reopened.knows(f"c{i}") for i in range(5)] == [False] * 3 + [True] * 2
    reopened.close()


def test_a_torn_last_line_stays_a_line_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "traffic.jsonl").write_text('{"request": {"model": "m", "messa')  # a crash
    log = TrafficLog(tmp_path)
    log.record_exchange(
        chat("hi"), {"id": "c1", "choices": [{"message": {"role": "assistant", "content": "yo"}}]}
    )
    log.close()
    traces, rejects, _ = ingest_files("openai_chat", [log.path])
    assert [t.source_id for t in traces] == ["c1"]
    assert [(r.line, r.reason.split(":")[0]) for r in rejects] == [(1, "invalid JSON")]


def test_one_folder_one_writer(tmp_path: Path) -> None:
    first = TrafficLog(tmp_path)
    second = TrafficLog(tmp_path)
    assert first.error is None
    assert second.error is not None and "another process" in second.error
    second.close()
    first.close()
    assert TrafficLog(tmp_path).error is None  # released on close


async def test_errors_and_oversized_exchanges_are_not_logged(tmp_path: Path) -> None:
    log = TrafficLog(tmp_path, max_record_bytes=200)
    async with client_for(log) as client:
        await client.post("/v1/chat/completions", json=chat("x" * 300))
        missing = await client.post("/v1/chat/completions", json={"model": "m"})
    log.close()
    assert missing.status_code >= 400
    assert log.path.read_text() == ""
    assert log.health()["counts"] == {"skipped_too_large": 1}


def test_a_logger_error_in_encoding_stops_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = TrafficLog(tmp_path)

    def broken(payload: Any) -> bytes:
        raise OSError(errno.EROFS, "read-only")

    monkeypatch.setattr(log, "_encode", broken)
    done = log.record_feedback("c", {"verdict": "up"})
    with pytest.raises(traffic_log.TrafficLogError, match="read-only"):
        done.result(5)
    assert log.health()["ok"] is False
    log.close()


async def test_a_corpus_build_keeps_the_upvoted_exchanges(tmp_path: Path) -> None:
    from tuneloop.data.corpus import build_corpus

    log = TrafficLog(tmp_path / "traffic")
    async with client_for(log) as client:
        for i, verdict in enumerate(["up", "down", None, "up"]):
            reply = await client.post("/v1/chat/completions", json=chat(f"what is {i} squared?"))
            if verdict:
                body = {"completion_id": reply.json()["id"], "verdict": verdict}
                assert (await client.post("/v1/feedback", json=body)).status_code == 200
    log.close()
    config = tmp_path / "corpus.yaml"
    config.write_text(
        f"sources:\n  - path: {log.path}\n    format: openai_chat\ndedup:\n  near: false\n"
    )
    result = build_corpus(config, tmp_path / "corpus", progress=False)
    rows = lines(result.sft_path)
    asked = sorted(r["messages"][0]["content"] for r in rows)
    assert asked == ["what is 0 squared?", "what is 3 squared?"]


async def test_the_embedded_server_app_takes_the_log_with_one_line(
    tiny_engine: Any, tmp_path: Path
) -> None:
    from tuneloop.serve.embedded import ServerSettings, create_app

    app = create_app(tiny_engine, "tiny", ServerSettings(api_key="k"))
    log = TrafficLog(tmp_path)
    install_traffic(app, log, api_key="k")  # the hookup the server makes with --traffic-dir
    auth = {"authorization": "Bearer k"}
    body = {"model": "tiny", "messages": [{"role": "user", "content": "1+1?"}], "max_tokens": 4}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=auth
    ) as client:
        reply = await client.post("/v1/chat/completions", json=body)
        fb = {"completion_id": reply.json()["id"], "verdict": "up"}
        assert (await client.post("/v1/feedback", json=fb)).status_code == 200
        health = (await client.get("/health")).json()
    log.close()
    assert health["model"] == "tiny" and health["traffic"]["ok"] is True
    (trace,) = ingest_files("openai_chat", [log.path])[0]
    assert trace.source_id == reply.json()["id"] and trace.feedback.verdict == "up"
