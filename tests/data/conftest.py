import json
from pathlib import Path

import pytest

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def tiny_suite(tmp_path) -> Path:
    items = [
        {"id": "q1", "messages": [{"role": "user", "content": "What is 3 + 6?"}], "answer": "9"},
        {"id": "q2", "messages": [{"role": "user", "content": "What is 40 + 2?"}], "answer": "42"},
        {"id": "q3", "messages": [{"role": "user", "content": "What is 9 - 1?"}], "answer": "8"},
    ]
    return write_jsonl(tmp_path / "suite.jsonl", items)


def exchange(i: int, question: str, answer: str, verdict=None) -> dict:
    line = {
        "request": {"model": "m", "messages": [{"role": "user", "content": question}]},
        "response": {
            "id": f"r{i}",
            "created": 1780000000 + i,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
        },
    }
    if verdict is not None:
        line["verdict"] = verdict
    return line
