"""A round held for power and released when its gate slice grows (issue 32, item 1).

The real round driver on the fake phases of `fakeloop.py`: the gate's MDE comes from the
conservative spread before any round (no pilot), and from the champion's log after one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.preflight.gate_power import ASSUMED_SD_DIFF, gate_items_needed, gate_mde
from tuneloop.loop.rounds.power import champion_pilot, next_round_power

from ..fakeloop import run_round
from .test_driver import flywheel_config


def _set(config: Path, gate_size: int, **triggers: object) -> None:
    cfg = yaml.safe_load(config.read_text())
    cfg["suite"]["rolling"]["gate_size"] = gate_size
    cfg["flywheel"]["triggers"] = triggers
    config.write_text(yaml.safe_dump(cfg))


def test_a_round_is_held_until_its_gate_slice_can_detect_the_target(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path)
    _set(config, 50, power_factor=2.0, target_effect=0.07)
    power = next_round_power(load_config(config), config, None)
    assert power.held and power.items == 50 and power.alpha == 0.05
    assert power.mde == pytest.approx(gate_mde(50, ASSUMED_SD_DIFF, 0.05))
    need = gate_items_needed(0.14, ASSUMED_SD_DIFF, 0.05)
    assert power.needed == need and f"needs {need - 50} more gate items" in power.text()
    with pytest.raises(InputError, match="held for power"):
        run_round(config)
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        (held,) = ledger.rounds()
    assert held.last is not None and held.last.outcome == "refused"
    assert "needs" in held.last.reason
    assert not (tmp_path / "work" / "rounds" / held.round_id / "eval_pre").exists()

    _set(config, 190, power_factor=2.0, target_effect=0.07)  # a slice of 190 fresh items
    power = next_round_power(load_config(config), config, None)
    assert not power.held and power.mde <= 0.14
    assert run_round(config) in (0, 1)


def test_the_pilot_is_the_champions_last_log_and_margin_zero_holds_nothing(
    tmp_path: Path,
) -> None:
    config = flywheel_config(tmp_path, gate_size=60)
    _set(config, 60)  # no power_factor: nothing is held
    assert run_round(config) in (0, 1)
    cfg = load_config(config)
    pilot = champion_pilot(cfg)
    assert pilot is not None and (pilot.parent.name, pilot.name) == ("r0001", "eval_post")
    power = next_round_power(cfg, config, pilot)
    assert str(pilot) in power.source and power.sd_diff < ASSUMED_SD_DIFF
    assert power.factor is None and not power.held
    cfg = load_config(config, ["gate.margin=0"])
    power = next_round_power(cfg, config, pilot)
    assert power.target is None and "no target effect" in power.text()
