"""Serving a cascade as one OpenAI-compatible endpoint (what a cascade is: `tuneloop.cascade_spec`;
what an answer says about it: `tuneloop.tiers`).

Modules: `router` (one request through the tiers: hand-off by threshold, or a rule router),
`app` (the HTTP surface and the process, `python -m tuneloop.serve.cascade.app PLAN`),
`backend` (the `cascade` serve backend: the local tiers, then the cascade server in front;
`tuneloop.serving.serving` picks it for a cascade descriptor file).
"""
