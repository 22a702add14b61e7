"""The loop: one command runs every phase in order, resumes, fails closed, archives.

This package is the only code that knows the order of the phases (see `phases.py`). Above it
sit the CLI (`tuneloop run`, `command.py`), `tuneloop.commands` (`tuneloop check` runs the
preflight and previews the next round), the flywheel (it starts rounds and reads their run
state and layout) and the view (it reads run states and the layout); nothing below them —
the phases, the shared libraries, the core — imports it (`tests/test_imports.py`). Where a
run's folders and artifacts live is `RunLayout` (`layout.py`).
"""

from tuneloop.loop.layout import RunLayout
from tuneloop.loop.phases import PHASE_NAMES, PHASES
from tuneloop.loop.runner import Runner, Selection

__all__ = ["PHASES", "PHASE_NAMES", "RunLayout", "Runner", "Selection"]
