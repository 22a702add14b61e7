"""Five third-party OpenAI clients against one server, as their users call them on defaults.

Run in the clients environment (`scripts/setup --clients`, `.venv-clients`), never in
tuneloop's: `python run_clients.py BASE_URL MODEL TOKENIZER_DIR WORKDIR`. BASE_URL ends in
`/v1`. Prints one JSON object: for each client what it got back, or the error it raised
(`{"error": "..."}`), so that the test (tests/serve/test_clients.py) can say which one broke
and how. No network: litellm reads its bundled cost map, the Agents SDK traces nothing.

- Inspect AI: a two-sample task through the `openai/<model>` provider, on its defaults and
  on the Responses API (`responses_api=True`).
- lm-eval: `local-completions` on its defaults (token-id prompts), the loglikelihood task
  `arith_mc.yaml` (echo + logprobs) and a generate_until request.
- LangChain: `ChatOpenAI(...).with_structured_output(Answer)` (its default method,
  `json_schema`).
- OpenAI Agents SDK: an agent with a function tool on its default model class (the
  Responses API), the call forced and its result returned (`stop_on_first_tool`).
- litellm: `litellm.responses(...)` and `litellm.completion(...)`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "unused")  # what every client sends; the server needs none
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
HERE = Path(__file__).resolve().parent


def inspect_ai(base: str, model: str, work: Path) -> dict[str, Any]:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    task = Task(
        dataset=[Sample(input="12+3=", target="15"), Sample(input="7+8=", target="15")],
        solver=generate(),
        scorer=includes(),
    )
    out = {}
    for label, args in (("default", {}), ("responses", {"responses_api": True})):
        [log] = eval(
            task,
            model=f"openai/{model}",
            model_base_url=base,
            model_args=args,
            log_dir=str(work / f"inspect-{label}"),
            display="none",
            max_tokens=8,
            temperature=0,
        )
        if log.status != "success":
            raise RuntimeError(f"{label}: {log.status}: {log.error}")
        answers = [s.output.completion for s in log.samples or []]
        out[label] = {"status": log.status, "answers": answers}
    return out


def lm_eval(base: str, model: str, tokenizer: str, work: Path) -> dict[str, Any]:
    import yaml
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tasks = work / "lm-eval-tasks"
    tasks.mkdir(exist_ok=True)
    shutil.copy(HERE / "arith_mc.jsonl", tasks / "arith_mc.jsonl")
    spec = yaml.safe_load((HERE / "arith_mc.yaml").read_text())
    spec["dataset_kwargs"]["data_files"]["test"] = str(tasks / "arith_mc.jsonl")
    (tasks / "arith_mc.yaml").write_text(yaml.safe_dump(spec))
    args = f"model={model},base_url={base}/completions,tokenizer={tokenizer},num_concurrent=1"
    results = simple_evaluate(
        model="local-completions",
        model_args=args,
        tasks=["tuneloop_arith_mc"],
        task_manager=TaskManager(include_path=str(tasks)),
        log_samples=False,
    )
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    lm = get_model("local-completions").create_from_arg_string(args)
    request = Instance("generate_until", {}, ("12+3=", {"until": ["\n"], "max_gen_toks": 8}), 0)
    [generated] = lm.generate_until([request])
    return {"acc": results["results"]["tuneloop_arith_mc"]["acc,none"], "generated": generated}


def langchain(base: str, model: str) -> dict[str, Any]:
    from typing import Literal

    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field

    class Answer(BaseModel):
        answer: int = Field(ge=0, le=999)
        unit: Literal["apples", "pears"]

    chat = ChatOpenAI(model=model, base_url=base, api_key="unused", temperature=0, max_tokens=48)
    got = chat.with_structured_output(Answer).invoke("12+3=")
    return {"answer": got.answer, "unit": got.unit}


def agents(base: str, model: str) -> dict[str, Any]:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    calls: list[tuple[int, int]] = []

    @function_tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        calls.append((a, b))
        return str(a + b)

    agent = Agent(
        name="adder",
        instructions="Add.",
        tools=[add],
        model=OpenAIResponsesModel(model, AsyncOpenAI(base_url=base, api_key="unused")),
        model_settings=ModelSettings(tool_choice="required", max_tokens=64, temperature=0),
        tool_use_behavior="stop_on_first_tool",
    )
    result = asyncio.run(Runner.run(agent, "12+3="))
    return {"final_output": result.final_output, "calls": calls}


def litellm(base: str, model: str) -> dict[str, Any]:
    import litellm as lite

    response = lite.responses(
        model=f"openai/{model}", input="12+3=", api_base=base, api_key="unused",
        max_output_tokens=8, temperature=0,
    )  # fmt: skip
    completion = lite.completion(
        model=f"openai/{model}", messages=[{"role": "user", "content": "12+3="}],
        api_base=base, api_key="unused", max_tokens=8, temperature=0,
    )  # fmt: skip
    text = "".join(
        part.text
        for item in response.output
        if getattr(item, "type", None) == "message"
        for part in item.content
    )
    return {"responses": text, "completion": completion.choices[0].message.content}


def main() -> None:
    base, model, tokenizer, work = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    work.mkdir(parents=True, exist_ok=True)
    runs = {
        "inspect_ai": lambda: inspect_ai(base, model, work),
        "lm_eval": lambda: lm_eval(base, model, tokenizer, work),
        "langchain": lambda: langchain(base, model),
        "agents": lambda: agents(base, model),
        "litellm": lambda: litellm(base, model),
    }
    only = set(sys.argv[5].split(",")) if len(sys.argv) > 5 else set(runs)
    out: dict[str, Any] = {}
    for name, run in runs.items():
        if name not in only:
            continue
        try:
            out[name] = run()
        except Exception as err:  # each client's failure is reported, not raised
            out[name] = {"error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
