"""The loop: one command runs every phase in order, resumes, fails closed, archives.

Only `tuneloop.cli` imports this package; this package is the only code that knows the
order of the phases (see `phases.py`).
"""

from tuneloop.loop.phases import PHASE_NAMES, PHASES
from tuneloop.loop.runner import Runner, Selection

__all__ = ["PHASES", "PHASE_NAMES", "Runner", "Selection"]
