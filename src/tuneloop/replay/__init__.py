"""Phase `replay`: N-teacher replay of traces → distillation rows, DPO pairs, a cost report.

    from tuneloop.replay import replay
    result = replay(traces, teachers_file, out_dir, ReplayConfig(judge="exact"))

or `tuneloop replay --traces T --teachers F --out DIR` (loop.yaml's `replay:` keys as
options). Modules: `teachers` (the teachers file), `plan` (which steps, what is sent),
`calls` (answer → scored `ReplayCall`), `store` (the resumable call log), `run` (the async
calls; the phase function), `select` (SFT rows, DPO pairs, the tie rule), `report` and
`outputs` (the report and the written files), `command` (`tuneloop replay`).
"""

from tuneloop.replay.run import ReplayResult, replay

__all__ = ["ReplayResult", "replay"]
