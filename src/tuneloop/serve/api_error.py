"""`ApiError`: a request a server refuses, and its OpenAI-style error body.

`{"error": {"message", "type", "param", "code"}}` with an HTTP status, as OpenAI sends it. Shared
by the embedded server (`embedded/`), the proxy (`proxy/`) and the traffic log's routes
(`traffic/`), so it sits beside them rather than inside one; pure (no FastAPI).
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the server refuses; rendered as an OpenAI error body."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }
