"""Property: a secret planted anywhere in a trace file never reaches any byte `tuneloop ingest`
or `tuneloop corpus build` writes (values, dict keys, ids, names, the model, file names)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tuneloop.cli import build_app
from tuneloop.errors import InputError

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64 = ALNUM + "/+"
WS = st.sampled_from([" ", "  ", "\t", " \t", "\n"])
SEP = st.sampled_from([" ", "\n", "\t", "_", "-", ":", "=", '"', "(", "/", ",", "."])


def _run(n: int, alphabet: str = ALNUM) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=n)


@st.composite
def secret(draw, file_safe: bool = False) -> tuple[str, str]:
    """(text to plant, the material that must never be written)."""
    kind = draw(
        st.sampled_from(
            ["sk", "proj", "ant", "ghp", "pat", "akia", "aiza", "slack", "hf"]
            + ([] if file_safe else ["bearer", "auth", "aws", "url", "jwt", "pem"])
        )
    )
    m = draw(_run(24))
    return {
        "sk": (f"sk-{m}", m),
        "proj": (f"sk-proj-{m}", m),
        "ant": (f"sk-ant-api03-{m}", m),
        "ghp": (f"ghp_{m}{m[:12]}", m),
        "pat": (f"github_pat_{m}", m),
        "akia": (f"AKIA{m[:16].upper()}", f"AKIA{m[:16].upper()}"),
        "aiza": (f"AIza{m}{m[:11]}", m),
        "slack": (f"xoxb-1234-{m}", m),
        "hf": (f"hf_{m}{m[:10]}", m),
        "bearer": (f"Bearer{draw(WS)}{m}", m),
        "auth": (f"Authorization:{draw(WS)}Bearer{draw(WS)}{m}", m),
        "aws": (f"aws_secret_access_key{draw(WS)}={draw(WS)}{draw(_run(40, B64))}", None),
        "url": (f"https://user:{m}@db.example.com/x", m),
        "jwt": (f"eyJhbGciOiJIUzI1NiJ9.eyJ{m}.{m[::-1]}", m),
        "pem": (f"-----BEGIN RSA PRIVATE KEY-----\n{m}\n{m}\n-----END RSA PRIVATE KEY-----", m),
    }[kind]


PLACES = [
    "user_content",
    "assistant_content",
    "tool_call_id",
    "tool_name",
    "arguments",
    "tool_result",
    "response_model",
    "response_id",
    "metadata_key",
    "feedback_key",
    "reject_role",
]


def _record(planted: dict[str, str], i: int) -> dict:
    def at(place: str, default: str) -> str:
        return planted.get(place, default)

    call_id = at("tool_call_id", f"call_{i}")
    arguments = json.dumps({"q": at("arguments", "x")})
    name = at("tool_name", "lookup")
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    if "metadata_key" in planted:
        tools[0]["function"]["parameters"] = {planted["metadata_key"]: {"type": "string"}}
    messages = [
        {"role": "user", "content": f"question {i}: " + at("user_content", "what?")},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": arguments,
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": at("tool_result", "42")},
    ]
    verdict: object = "up"
    if "feedback_key" in planted:
        verdict = {"thumbs": "up", planted["feedback_key"]: 1}
    return {
        "request": {"model": "m", "messages": messages, "tools": tools},
        "response": {
            "id": at("response_id", f"r{i}"),
            "created": 1780000000 + i,
            "model": at("response_model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": at("assistant_content", "ok")},
                }
            ],
        },
        "verdict": verdict,
    }


@st.composite
def trace_file(draw) -> tuple[list[str], str, list[str]]:
    """(JSONL lines, a file name, every secret material planted)."""
    materials: list[str] = []
    lines = []
    for i in range(draw(st.integers(1, 4))):
        planted = {}
        for place in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True)):
            text, material = draw(secret())
            planted[place] = draw(SEP) + text + draw(SEP)
            materials.append(material or text.rsplit(" ", 1)[-1].split("=")[-1].strip())
        record = _record(planted, i)
        if "reject_role" in planted:
            record["request"]["messages"][0]["role"] = planted["reject_role"]
        lines.append(json.dumps(record))
    name_secret, name_material = draw(secret(file_safe=True))
    materials.append(name_material)
    return lines, f"log-{name_secret}.jsonl", materials


runner = CliRunner()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_file())
def test_no_planted_secret_reaches_any_output_byte(case) -> None:
    lines, file_name, materials = case
    app = build_app()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs, outputs = root / "in", root / "out"
        inputs.mkdir()
        src = inputs / file_name
        src.write_text("\n".join(lines) + "\n")
        ingest = runner.invoke(
            app, ["ingest", "-f", "openai_chat", str(src), "-o", str(outputs / "traces.jsonl")]
        )
        if isinstance(ingest.exception, InputError) and "0 records" in str(ingest.exception):
            # every line rejected: refused with one line, nothing written, no secret in it
            assert not outputs.exists()
            assert not any(m in str(ingest.exception) for m in materials)
            return
        assert ingest.exit_code == 0, ingest.output
        cfg = inputs / "corpus.yaml"
        cfg.write_text(
            json.dumps({"sources": [{"path": str(src)}], "filter": {"keep_unrated": True}})
        )
        build = runner.invoke(app, ["corpus", "build", str(cfg), "--out", str(outputs / "corpus")])
        assert build.exit_code == 0, build.output
        written = [p for p in outputs.rglob("*") if p.is_file()]
        assert {p.name for p in written} >= {"traces.jsonl", "sft.jsonl", "provenance.json"}
        for material in materials:
            needle = material.encode()
            for path in written:
                assert needle not in path.read_bytes(), (material, path.name)
            assert material not in ingest.output + build.output
