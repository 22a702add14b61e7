"""Built-in scorers; importing this package registers them in `tuneloop.registry.scorers`.

exact, regex, choice  (text.py)       numeric  (numeric.py)
json                  (jsonscore.py)  python_tests  (python_tests.py, runs sandbox/)
agent_answer, tool_call_valid, tool_match, redundant_calls, failed_calls, turns, tokens
                      (agent.py: agent trajectories)
judge                 (judge/: an LLM judge, grade or pairwise, for answers without a reference)

`base.py` registers them (`@scorer`, with their properties); `resolve.py` picks an item's
scorer. What a scorer is (`ScorerFactory`, `ScoreFn`, `Score`) is core: `tuneloop.plugins`.
"""

from tuneloop.scorers import agent, jsonscore, judge, numeric, python_tests, text  # noqa: F401
