"""A stand-in for `tuneloop run CONFIG --round ROUND --trigger-file FILE` in the watcher's tests.

    python fake_round.py PLAN WORKDIR ROUND TRIGGER_FILE

Keeps the real round command's contract: `<workdir>/rounds/<round>/` exists once a round has
started (a rerun resumes it), a finished round rerun reports its recorded exit status without
working again, SIGTERM exits 143 and SIGINT 130. What it does is read from the JSON PLAN
(`{"sleep": s, "until": path, "exit": n, "ignore_term": bool, "say": "error: …"}`: `until`
ends the sleep early once that file exists; optionally overridden
per round under `"rounds": {"r0001": {…}}`), re-read at every start so that a test can change
it between attempts. Every step is appended to `<workdir>/fake-events.txt` (`start r0001
<pid>`, `term r0001`, `done r0001 0`, `exit r0001 2`, `again r0001`): the tests count them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def event(workdir: Path, text: str) -> None:
    with (workdir / "fake-events.txt").open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def main() -> int:
    plan_path, workdir, round_id, trigger_file = sys.argv[1:5]
    workdir_p = Path(workdir)
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    plan = {**plan, **plan.get("rounds", {}).get(round_id, {})}
    trigger = json.loads(Path(trigger_file).read_text(encoding="utf-8"))
    if trigger["round_id"] != round_id or trigger["schema"] != "tuneloop.round_trigger/1":
        print(f"error: trigger file {trigger_file} is not round {round_id}'s", file=sys.stderr)
        return 2
    folder = workdir_p / "rounds" / round_id
    done = folder / "done.json"
    if done.exists():
        event(workdir_p, f"again {round_id}")
        return int(json.loads(done.read_text(encoding="utf-8"))["exit"])
    folder.mkdir(parents=True, exist_ok=True)

    def stop(signum: int, frame: object) -> None:
        if plan.get("ignore_term") and signum == signal.SIGTERM:
            event(workdir_p, f"ignored-term {round_id}")
            return
        event(workdir_p, f"term {round_id}")
        sys.exit(128 + signum)

    # handlers first: a test that signals on seeing "start" must find them installed (under
    # load, a SIGTERM between the two once killed the fake silently, with no "term" event)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    event(workdir_p, f"start {round_id} {os.getpid()}")
    end = time.monotonic() + float(plan.get("sleep", 0))
    until = Path(plan["until"]) if plan.get("until") else None
    while time.monotonic() < end and not (until is not None and until.exists()):
        time.sleep(0.02)
    code = int(plan.get("exit", 0))
    if plan.get("say"):
        print(plan["say"], file=sys.stderr, flush=True)
    if code in (0, 1, 3):  # a verdict (or a failure) is final; 2 and 130/143 are not
        done.write_text(json.dumps({"exit": code}), encoding="utf-8")
        event(workdir_p, f"done {round_id} {code}")
    else:
        event(workdir_p, f"exit {round_id} {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
