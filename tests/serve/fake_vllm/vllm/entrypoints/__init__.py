"""Part of the fake vLLM package (tests/serve/fake_vllm_env.py)."""
