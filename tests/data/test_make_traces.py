import importlib.util
import json

from .conftest import ARITH


def _script():
    spec = importlib.util.spec_from_file_location("make_traces", ARITH / "make_traces.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_production_log_is_what_the_script_writes():
    mt = _script()
    suite = mt._items(ARITH / "suite.jsonl")
    lines = mt.make_lines(suite, mt._items(ARITH / "train_prompts.jsonl"))
    committed = (ARITH / "traces" / "production.jsonl").read_text().splitlines()
    assert lines == committed  # regenerate with: python examples/arith/make_traces.py


def test_only_the_planted_suite_items_leak():
    mt = _script()
    suite = {i["messages"][0]["content"] for i in mt._items(ARITH / "suite.jsonl")}
    asked = []
    for line in (ARITH / "traces" / "production.jsonl").read_text().splitlines():
        try:
            asked.append(json.loads(line)["request"]["messages"][-1]["content"])
        except json.JSONDecodeError:
            continue  # the planted torn line
    leaks = {q for q in asked if q in suite}
    assert len(leaks) == mt.LEAKS
