"""A rich progress bar for an eval: samples done, items complete, errors and retries.

It draws on stderr and only when enabled (the runner's `progress=False` and non-terminals
leave it off), and costs one dictionary update per finished sample (nothing when off).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tuneloop.samplelog import SampleRow


class EvalProgress:
    def __init__(
        self, n_items: int, n_samples: int, existing: dict[Any, SampleRow], enabled: bool
    ) -> None:
        self.enabled = enabled
        self.n_samples = n_samples
        self.n_items = n_items
        self.per_item: Counter[str] = Counter(item_id for item_id, _ in existing)
        self.items_done = sum(1 for c in self.per_item.values() if c >= n_samples)
        self.errors = sum(1 for r in existing.values() if r.status != "ok")
        self.missing = 0
        self.retries = 0
        self._done = len(existing)
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> EvalProgress:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("eval"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("samples · {task.fields[status]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            refresh_per_second=4,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            "eval", total=self.n_items * self.n_samples, completed=self._done, status=self._status()
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.update(self._task, status=self._status())
            self._progress.stop()

    def _status(self) -> str:
        return (
            f"items {self.items_done}/{self.n_items} · err {self.errors} · "
            f"missing {self.missing} · retries {self.retries}"
        )

    def advance(self, item_id: str, status: str | None, retries: int) -> None:
        """Count one finished sample: its row's status (None: it failed after all retries)."""
        if self._progress is None:
            return  # the counts are only ever drawn
        self.retries = retries
        if status is None:
            self.missing += 1
        elif status != "ok":
            self.errors += 1
        self.per_item[item_id] += 1
        if self.per_item[item_id] == self.n_samples:
            self.items_done += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, status=self._status())
