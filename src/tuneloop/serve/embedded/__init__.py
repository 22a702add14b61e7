"""The embedded OpenAI-compatible server: FastAPI routes over a continuously batched engine.

    tuneloop serve examples/arith/model --port 8000      # or: python -m tuneloop.serve.app
    run_server("examples/arith/model", ServerSettings(config=ServerConfig(port=8000)))

Modules, from the process down: `server` (bind, load, serve until a signal), `routes` (the
FastAPI handlers), `protocol` (the OpenAI request models and limits), `stream` (server-sent
events), `tools` (tool calls rendered in, parsed back out), `engine` (the worker thread that
steps the batch), `decode` (batched decoding with per-row sampling), `kvcache` (reshaping the
KV cache for continuous batching), `row` (what the engine decodes and returns).

Importing this package loads FastAPI but not torch: `server` imports the engine only once the
port is bound, so a busy port fails in milliseconds.
"""

from tuneloop.serve.embedded.routes import ServerSettings, create_app
from tuneloop.serve.embedded.server import EXIT_LOAD, run_server
from tuneloop.serve.embedded.tools import ToolCall, parse_tool_calls

__all__ = [
    "EXIT_LOAD",
    "ServerSettings",
    "ToolCall",
    "create_app",
    "parse_tool_calls",
    "run_server",
]
