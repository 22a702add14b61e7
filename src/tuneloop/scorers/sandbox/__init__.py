"""Run untrusted Python (model-written code plus its tests) in a contained subprocess.

    from tuneloop.scorers.sandbox import Limits, run_python
    result = run_python("print(1 + 1)", Limits(wall_s=5))
    result.returncode, result.stdout, result.reason      # 0, "2\n", None

Modules: `execute` (`run_python`, the layers and what is not isolated), `kinds` (the kinds of
kernel isolation, which one works here, the per-run uid slots), `pid1` (PID 1 of a namespaced
run, which builds the file-system jail; run as a file by `execute`, never imported).
"""

from tuneloop.scorers.sandbox.execute import Limits, SandboxResult, isolation, run_python
from tuneloop.scorers.sandbox.kinds import Isolation

__all__ = ["Isolation", "Limits", "SandboxResult", "isolation", "run_python"]
