"""The flywheel: rounds over time around the served champion.

- `exchanges`: reading the traffic log (exchanges, feedback) and counting new labels;
- `features`: request features and their drift (PSI) against the last round's training rows;
- `triggers`: pure trigger and pacing decisions (`evaluate_triggers`, `PacingState`);
- `status`: one read-only look (`gather_status` → `FlywheelStatus`), `render`: its text;
- `command`: `tuneloop status` (the look plus the watcher's pacing, rounds and decisions);
- `watch`: the watcher (`Watcher`: look, decide, run one round at a time), with
  `watch_look` (which round came last; a look not repeated on unchanged inputs),
  `watch_state` (`<workdir>/flywheel.db`: rounds, decisions, pacing; the trigger record),
  `watch_process` (the one-per-ledger lock, signals, the round process);
- `watch_command`: `tuneloop watch` and `tuneloop approve` (spend, or a promotion);
- `service` (with `service_processes`, `service_adoption`): the champion served behind
  `tuneloop proxy` and switched without downtime; `reserve`: follow the ledger's champion;
  `champion_service`: how `tuneloop watch` builds it (`flywheel.serve.managed`).

A round itself is the loop's (`tuneloop.loop.rounds`, `tuneloop run --round`): the watcher
runs it as a subprocess.

The rolling one-look split of the suite is core (`tuneloop.suite_rolling`); the flywheel's
settings are `tuneloop.config.flywheel`. Importing this package loads nothing heavy.
"""
