"""A fake vLLM API server for the serving tests: `python -m vllm.entrypoints.openai.api_server
--model MODEL --host H --port P ...` with this package on PYTHONPATH (tests/serve/fake_vllm_env.py
makes an environment whose python does that), or this file run as a script.

Speaks just enough of the OpenAI API (health, models, chat and text completions answering
"42", naming the model asked for; an unknown model is a 404) to exercise tuneloop's vllm
backend without vLLM; with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, also vLLM's
`/v1/load_lora_adapter` and `/v1/unload_lora_adapter` (a name loaded twice is a 400, an unknown
one unloaded a 404, as vLLM answers). Prints its argv (never the key) so
tests can check the command line; requires `Authorization: Bearer $VLLM_API_KEY` when set.
Standard library only.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "42"


def main() -> None:
    args = sys.argv[1:]
    if "--model" not in args:
        sys.exit("usage: api_server --model MODEL [--host H] [--port P] ...")
    model = args[args.index("--model") + 1]
    host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    port = int(args[args.index("--port") + 1]) if "--port" in args else 8000
    print("fake vllm argv:", " ".join(args), flush=True)
    if os.environ.get("FAKE_VLLM_FAIL"):
        sys.exit("fake vllm: failing on purpose (FAKE_VLLM_FAIL)")
    key = os.environ.get("VLLM_API_KEY")
    name = args[args.index("--served-model-name") + 1] if "--served-model-name" in args else model
    name_of_base = name
    runtime_lora = os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "").lower() in ("1", "true")
    listed = [{"id": name, "object": "model", "root": model}]
    if "--lora-modules" in args:  # NAME=DIR, listed as vLLM lists a LoRA module
        lora, folder = args[args.index("--lora-modules") + 1].split("=", 1)
        listed.append({"id": lora, "object": "model", "root": folder, "parent": name})

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._send(
                    401,
                    {
                        "error": {
                            "message": "bad key",
                            "type": "auth",
                            "param": None,
                            "code": "invalid_api_key",
                        }
                    },
                )
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models" and self._authorized():
                self._send(200, {"object": "list", "data": listed})
            elif self.path != "/v1/models":
                self._send(404, {"error": {"message": "not found"}})

        def _runtime_lora(self, body: dict) -> None:
            name = body.get("lora_name")
            known = [m for m in listed if m["id"] == name]
            if self.path == "/v1/load_lora_adapter":
                if known:
                    self._send(400, {"error": {"message": f"{name} has already been loaded"}})
                    return
                listed.append({"id": name, "object": "model", "root": body["lora_path"]})
                listed[-1]["parent"] = name_of_base
            elif not known:
                self._send(404, {"error": {"message": f"The lora adapter {name} cannot be found"}})
                return
            else:
                listed.remove(known[0])
            print(f"fake vllm: {self.path} {name}", flush=True)
            self._send(200, {})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not self._authorized():
                return
            if self.path.endswith("_lora_adapter") and runtime_lora:
                self._runtime_lora(body)
                return
            asked = body.get("model", name_of_base)
            if asked not in [m["id"] for m in listed]:
                self._send(404, {"error": {"message": f"The model `{asked}` does not exist."}})
                return
            n = int(body.get("n", 1))
            if self.path == "/v1/chat/completions":
                choices = [
                    {
                        "index": i,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": ANSWER},
                    }
                    for i in range(n)
                ]
                obj = "chat.completion"
            elif self.path == "/v1/completions":
                choices = [{"index": i, "finish_reason": "stop", "text": ANSWER} for i in range(n)]
                obj = "text_completion"
            else:
                self._send(404, {"error": {"message": "not found"}})
                return
            self._send(
                200,
                {
                    "id": "fake",
                    "object": obj,
                    "created": 0,
                    "model": asked,
                    "choices": choices,
                    "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1},
                },
            )

        def log_message(self, fmt: str, *a: object) -> None:
            print("fake vllm:", fmt % a, flush=True)

    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
