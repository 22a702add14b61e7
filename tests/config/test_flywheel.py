"""A broken flywheel config: `check`, `watch` and `status` report every error at once (issue
25 item 11: one needed four rounds of fixes, each command showing the next layer)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..installed import tuneloop

ROOT = Path(__file__).resolve().parents[2]

FLY = """\
name: fly
workdir: work
base_model: champion
suite:
  path: flywheel_suite.jsonl
  rolling: {audit_fraction: 0.2, gate_size: 120, seed: 0}
data:
  corpus: nocorpus.yaml
train:
  method: sft
gate:
  min_items: 40
flywheel:
  bootstrap: nomodel
  traffic: [notraffic]
  serve: {port: 99999}
  triggers:
    min_new_labels: 0
    features: [tag]
"""


def _project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "arith" / "flywheel_suite.jsonl", tmp_path)
    (tmp_path / "fly.yaml").write_text(FLY)
    return tmp_path / "fly.yaml"


def test_schema_errors_hide_no_other_error(tmp_path: Path) -> None:
    config = _project(tmp_path)
    schema = [
        "flywheel.triggers.min_new_labels (line 18): must be >= 1",
        # a field's rule, reported with the others (it was a model rule: the next round)
        "flywheel.triggers.features (line 19): ['tag'] are always measured",
        "flywheel.serve.port (line 16)",
    ]
    rounds = ["flywheel.bootstrap (line 14): ", "data.corpus (line 8): "]
    traffic = "flywheel.traffic.0 (line 15): "
    ran = tuneloop("check", config, cwd=tmp_path)
    ran.assert_input_error(*schema, *rounds)
    ran = tuneloop("watch", config, cwd=tmp_path)
    ran.assert_input_error(*schema, *rounds, traffic)
    ran = tuneloop("status", config, cwd=tmp_path)
    ran.assert_input_error(*schema, traffic)
    assert not (tmp_path / "work").exists()
