"""The flywheel: rounds over time around the served champion.

- `exchanges`: reading the traffic log (exchanges, feedback) and counting new labels;
- `features`: request features and their drift (PSI) against the last round's training rows;
- `triggers`: pure trigger and pacing decisions (`evaluate_triggers`, `PacingState`);
- `status`: one read-only look (`gather_status` → `FlywheelStatus`), `render`: its text;
- `paths`: the flywheel's own files in a workdir (`FlywheelPaths`: `flywheel.db`, trigger
  files, round logs, the service's state); a round's folder is the run layout's;
- `command`: `tuneloop status` (the look plus the watcher's pacing, rounds and decisions);
- `watch/`: the watcher (`Watcher`: look, decide, run one round at a time), its state
  (`<workdir>/flywheel.db`: rounds, decisions, pacing; the trigger record), its lock and round
  process, and `tuneloop watch` / `tuneloop approve` (spend, or a promotion);
- `service/`: the champion served behind `tuneloop proxy` and switched without downtime,
  following the ledger's champion; how `tuneloop watch` builds it (`flywheel.serve.managed`).

A round itself is the loop's (`tuneloop.loop.rounds`, `tuneloop run --round`): the watcher
runs it as a subprocess.

The rolling one-look split of the suite is core (`tuneloop.suite.rolling`); the flywheel's
settings are `tuneloop.config.flywheel`. Importing this package loads nothing heavy.
"""
