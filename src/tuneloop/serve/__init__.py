"""Phase `serve`: the serving backends and the servers behind them.

    with serving(model_dir, cfg.serve, arm="pre", decoding=contract) as ep: ...   # tuneloop.serving
    tuneloop serve MODEL_DIR        # the embedded server in the foreground
    tuneloop proxy --upstream URL   # the reverse proxy, with --log-dir the traffic log

`serving()` (`tuneloop.serving`) and the contract it speaks — `Endpoint`, `Decoding`, the
`ServeBackend` protocol (`tuneloop.endpoint`) — sit below the phases, because the loop and the
replay phase both serve models and a phase never imports another phase. What this package
holds is found by name through the registry, or run by the CLI:

- `backends`: the built-in backends `embedded`, `vllm`, `external` (registered in
  `tuneloop.registry.serve_backends`), each taking the typed `serve` section;
- `lifecycle`: spawn a server in its own process group, wait until it answers a real
  completion, take the whole group down (and `bind`, the server side of the same hygiene);
- `command`: `tuneloop serve` and `tuneloop proxy`; `app`: `python -m tuneloop.serve.app`,
  what the `embedded` backend spawns;
- `embedded/`: the embedded OpenAI-compatible server (FastAPI + transformers, continuous
  batching); `proxy/`: the reverse proxy with a switchable upstream; `traffic/`: the traffic
  log both of them write; `api_error`: the OpenAI error body all three send.

This face imports nothing: `tuneloop --help` loads `command` only, and FastAPI, aiohttp and
torch are imported when a server actually runs.
"""
