"""The OpenAI-compatible reverse proxy: a switchable upstream in front of a server, logged.

    tuneloop proxy --upstream http://127.0.0.1:8000 --port 8100 --log-dir runs/traffic
    run_proxy(ProxySettings(upstream="http://127.0.0.1:8000"), host="127.0.0.1", port=8100,
              log=None)

Modules: `forward` (the forwarding itself, switching and draining upstreams; what the proxy
does and why), `relay` (the ASGI messages of one forwarded exchange), `urls` (upstream base
URLs and origins), `app` (the routes, the admin routes, and `run_proxy`, the process), and
shadow evaluation: `mirror` (sampled chat requests asked again of a challenger in the
background, `--shadow`), `shadow_answers` (both answers read from their bytes), `pairlog`
(`<log-dir>/shadow/pairs.jsonl` and `state.json`). The traffic log it writes is `serve/traffic/`.
"""

from tuneloop.serve.proxy.app import create_proxy_app, run_proxy
from tuneloop.serve.proxy.forward import Proxy, ProxySettings
from tuneloop.serve.proxy.mirror import Mirror, ShadowSettings, check_shadow
from tuneloop.serve.proxy.urls import normalize_upstream

__all__ = [
    "Mirror",
    "Proxy",
    "ProxySettings",
    "ShadowSettings",
    "check_shadow",
    "create_proxy_app",
    "normalize_upstream",
    "run_proxy",
]
