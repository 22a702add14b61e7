"""The agent loop of an eval: one (item, sample) of an item with `tools`, turn by turn.

    trace, last = await run_agent(client, item, payload, budget, seeds)

Each turn sends the item's messages plus the trajectory so far, with the item's tools, and the
turn's own seed (`plan.turn_seed`). A reply with tool calls has them checked and run against
the item's environment (`tuneloop.envs.run_calls`: bad JSON, an unknown tool, arguments that
break the schema, or a tool that raises all come back to the model as a tool error, and the
loop goes on); a reply without tool calls is the final answer. The loop stops there, after
`max_turns` turns, or once the tokens used (prompt + completion, summed over turns, as the
server reports them) reach the budget; the last two leave the trajectory unfinished, which
scores 0 (`scorers/agent.py`).

A sample is all or nothing: an infrastructure failure in any turn (after the client's retries)
leaves the whole sample missing, to be asked again from its first turn by a rerun. Since each
turn's seed and the environment are deterministic, a rerun against a deterministic server
rebuilds the same trajectory; nothing of an unfinished sample is ever written, so the log
stays one row per (item, sample).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuneloop.client import MalformedResponse, OpenAIClient, ReplicaClient
from tuneloop.envs import environment_for, item_tools, run_calls, tool_parameters
from tuneloop.samplelog import AgentBudget, AgentTrace
from tuneloop.suite import SuiteItem


@dataclass(frozen=True)
class Turn:
    """One parsed chat reply."""

    content: str | None
    tool_calls: list[Any]
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class AgentRun:
    trace: AgentTrace
    finish_reason: str | None
    """The last turn's."""
    latency_s: float
    """Summed over turns."""


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_turn(body: bytes) -> Turn:
    """A chat reply with text and/or tool calls; anything else raises MalformedResponse."""
    try:
        data = json.loads(body)
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise MalformedResponse(
            f"response is not a chat completion: {type(err).__name__}"
        ) from None
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0].message is not an object")
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if not isinstance(calls, list):
        raise MalformedResponse("message.tool_calls is not a list")
    if not (isinstance(content, str) or (content is None and calls)):
        raise MalformedResponse(f"message content is {type(content).__name__}, not a string")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    finish = data["choices"][0].get("finish_reason")
    return Turn(
        content=content,
        tool_calls=calls,
        finish_reason=finish if isinstance(finish, str) else None,
        prompt_tokens=_count(usage, "prompt_tokens"),
        completion_tokens=_count(usage, "completion_tokens"),
    )


async def run_agent(
    client: OpenAIClient | ReplicaClient,
    item: SuiteItem,
    payload: dict[str, Any],
    budget: AgentBudget,
    seed: Callable[[int], int],
) -> AgentRun:
    """Drive one trajectory (see the module docstring); `seed(turn)` is each turn's seed.

    Raises what `client.request` raises (RequestFailed, EndpointRefused) and
    MalformedResponse for a reply that is not a chat completion."""
    env = environment_for(item.raw)
    schemas = tool_parameters(item.raw)
    tools = item_tools(item.raw)
    trace = AgentTrace(max_turns=budget.max_turns, token_budget=budget.token_budget)
    finish: str | None = None
    latency = 0.0
    for turn in range(budget.max_turns):
        if budget.token_budget is not None and trace.tokens >= budget.token_budget:
            trace.stop = "token_budget"
            break
        body = {
            **payload,
            "seed": seed(turn),
            "messages": [*(item.messages or []), *trace.messages],
            "tools": tools,
        }
        raw, seconds = await client.request(body, chat=True)
        reply = parse_turn(raw)
        latency += seconds
        finish = reply.finish_reason
        trace.turns += 1
        trace.prompt_tokens += reply.prompt_tokens
        trace.completion_tokens += reply.completion_tokens
        if not reply.tool_calls:
            trace.messages.append({"role": "assistant", "content": reply.content})
            trace.stop = "answer"
            return AgentRun(trace, finish, latency)
        calls, results = run_calls(reply.tool_calls, turn, schemas, env)
        trace.messages.append(
            {
                "role": "assistant",
                "content": reply.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.raw_arguments},
                    }
                    for c in calls
                ],
            }
        )
        trace.messages.extend(results)
        trace.calls.extend(calls)
    else:
        trace.stop = "max_turns"
    return AgentRun(trace, finish, latency)
