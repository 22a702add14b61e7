"""`tuneloop replay` refuses what it must before any call (the installed script)."""

from __future__ import annotations

from ..installed import tuneloop


def test_an_out_folder_whose_products_replace_the_traces_is_refused(
    tmp_path, teachers_server, kit
) -> None:
    """Issue 25 defect 7: `--out` holding its input (traces named sft.jsonl) was overwritten."""
    out = tmp_path / "out"
    out.mkdir()
    traces = kit.write_traces(out / "sft.jsonl", [kit.arith_trace(i, i, 1) for i in range(2)])
    before = traces.read_bytes()
    teachers = kit.write_teachers(tmp_path / "teachers.yaml", teachers_server.url, [{"name": "a"}])
    ran = tuneloop("replay", "--traces", traces, "--teachers", teachers, "--out", out, cwd=tmp_path)
    ran.assert_input_error("--out", "is the input", str(traces))
    assert traces.read_bytes() == before and sorted(p.name for p in out.iterdir()) == ["sft.jsonl"]
    assert sum(teachers_server.state.calls.values()) == 0


def test_a_replay_with_nothing_to_replay_exits_2_and_writes_nothing(
    tmp_path, teachers_server, kit
) -> None:
    """An empty traces file gave "0 steps → 0 SFT rows" and exit 0 (the class of defect 13)."""
    traces = tmp_path / "traces.jsonl"
    traces.write_text("")
    teachers = kit.write_teachers(tmp_path / "teachers.yaml", teachers_server.url, [{"name": "a"}])
    out = tmp_path / "out"
    ran = tuneloop("replay", "--traces", traces, "--teachers", teachers, "--out", out, cwd=tmp_path)
    ran.assert_input_error(str(traces), "0 steps to replay", "nothing written")
    assert not out.exists()


def test_a_traces_folder_is_named_as_a_folder(tmp_path, teachers_server, kit) -> None:
    """Was "traces not found" for a folder that exists."""
    (tmp_path / "traces").mkdir()
    teachers = kit.write_teachers(tmp_path / "teachers.yaml", teachers_server.url, [{"name": "a"}])
    ran = tuneloop(
        "replay", "--traces", "traces", "--teachers", teachers, "--out", "out", cwd=tmp_path
    )
    ran.assert_input_error("--traces traces", "is a folder")
