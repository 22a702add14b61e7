"""`docs/config.md`: every loop.yaml key with its default and meaning, from the field docstrings.

Regenerate:

    python -c 'from tuneloop.config import config_reference; print(config_reference())' \\
        > docs/config.md
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from tuneloop.config.models import LoopConfig


def config_reference() -> str:
    """Markdown reference of every loop.yaml key, from the models' field docstrings."""
    lines = [
        "# loop.yaml reference",
        "",
        "Generated from the section models in `tuneloop/config/`; do not edit.",
        "",
    ]

    def walk(model: type[BaseModel], prefix: str) -> None:
        rows, subs = [], []
        for name, field in model.model_fields.items():
            ann = field.annotation
            optional = [a for a in getattr(ann, "__args__", ()) if a is not type(None)]
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                subs.append((name, ann))
                continue
            sub = optional[0] if len(optional) == 1 else None
            if isinstance(sub, type) and issubclass(sub, BaseModel):  # optional: row + its keys
                subs.append((name, sub))
            value = json.dumps(field.default, default=str, ensure_ascii=False)
            default = "required" if field.is_required() else f"`{value}`"
            doc = (field.description or "").replace("\n", " ")
            rows.append(f"| `{prefix}{name}` | {default} | {doc} |")
        if rows:
            lines.extend([f"## `{prefix.rstrip('.') or '(top level)'}`", ""])
            lines.extend(["| key | default | meaning |", "|---|---|---|", *rows, ""])
        for name, sub in subs:
            walk(sub, f"{prefix}{name}.")

    walk(LoopConfig, "")
    return "\n".join(lines)
