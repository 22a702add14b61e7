"""The traffic log: every served exchange and its feedback, scrubbed, fsynced, rotated.

    log = TrafficLog(Path("runs/traffic"))
    install_traffic(app, log)              # any FastAPI app: logs completions, adds feedback

Written by the proxy (`serve/proxy/`) and, with `--traffic-log`, the embedded server; read by
the `openai_chat` ingester and the flywheel. Modules: `middleware` (the ASGI middleware and
`POST /v1/feedback`), `log` (the writer thread: scrub, group commit, rotation, the id index),
`exchange` (one exchange line, and the cascade trace it carries), `files` (the folder: names,
lock, rotated files, ids on disk).
"""

from tuneloop.serve.traffic.log import TrafficLog, TrafficLogError
from tuneloop.serve.traffic.middleware import FeedbackBody, TrafficMiddleware, install_traffic

__all__ = ["FeedbackBody", "TrafficLog", "TrafficLogError", "TrafficMiddleware", "install_traffic"]
