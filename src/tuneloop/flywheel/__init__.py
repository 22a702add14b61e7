"""The flywheel: rounds over time around the served champion.

- `exchanges`: reading the traffic log (exchanges, feedback) and counting new labels;
- `features`: request features and their drift (PSI) against the last round's training rows;
- `triggers`: pure trigger and pacing decisions (`evaluate_triggers`, `PacingState`);
- `status`: one read-only look (`gather_status` → `FlywheelStatus`), `render`: its text;
- `command`: `tuneloop status`.

The rolling one-look split of the suite is core (`tuneloop.suite_rolling`); the flywheel's
settings are `tuneloop.config.flywheel`. Importing this package loads nothing heavy.
"""
