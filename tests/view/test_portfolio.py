"""A portfolio round on the dashboard: its challengers, read from the archived run's
`challengers/selection.json` (tests/portfolio_fixture.py), and the experiment log's challenger
table kept as a table."""

from __future__ import annotations

from pathlib import Path

from tuneloop.archive import ARCHIVED_RUN_DIR
from tuneloop.config import load_config
from tuneloop.gate.explog import append_entry, verdict_entry
from tuneloop.loop.layout import RunLayout, archive_root
from tuneloop.view.explog_entries import read_entries
from tuneloop.view.history import gather
from tuneloop.view.page import render_dashboard
from tuneloop.view.sources import resolve

from ..gate.test_explog import VERDICTS
from ..loop.fakeloop import runner, write_config
from ..portfolio_fixture import DEFAULT, ERROR, FAILED, SELECTED, portfolio_record, write_portfolio


def test_a_run_with_challengers_shows_them(tmp_path: Path) -> None:
    config = write_config(tmp_path)  # one `tuneloop run`: its own entry on the dashboard
    runner(config).run()
    (before,) = gather(resolve(config, None)).rounds
    assert before.portfolio is None and before.run_id is not None
    html = render_dashboard(gather(resolve(config, None)))
    assert 'class="challengers"' not in html
    archived = RunLayout(archive_root(load_config(config)) / before.run_id / ARCHIVED_RUN_DIR)
    write_portfolio(archived.portfolio_record, before.run_id)

    (run,) = gather(resolve(config, None)).rounds
    assert run.portfolio == portfolio_record(before.run_id)
    html = render_dashboard(gather(resolve(config, None)))
    table = html[html.index('<table class="challengers">') :]
    table = table[: table.index("</table>")]
    assert "3 challengers compared on <code>validation</code>" in html
    assert "selected " + SELECTED in html
    rows = table.split("<tr")[2:]  # after the header row
    assert len(rows) == 3
    assert f'<code>{DEFAULT}</code> (default)</td><td class="num">0.6200</td><td></td>' in rows[0]
    assert rows[1].startswith(' class="selected"') and "<td>✓</td>" in rows[1]
    assert "0.7000" in rows[1]
    assert rows[2].startswith(' class=" failed"') and f"<code>{FAILED}</code>" in rows[2]
    assert '<td class="num">—</td>' in rows[2] and ">failed</td>" in rows[2]
    assert "CUDA out of memory" in rows[2]  # the error on hover


def test_the_log_entrys_challenger_table_stays_a_table(tmp_path: Path) -> None:
    log = tmp_path / "EXPERIMENT-LOG.md"
    append_entry(log, "verdict r1", verdict_entry(VERDICTS[0], portfolio_record()))
    (entry,) = read_entries(log)
    assert entry.bullets[-1] == "Challengers:"
    assert entry.table[0][:2] == ["challenger", "recipe"]
    assert [row[0] for row in entry.table[1:]] == [
        f"`{DEFAULT}` (default)",
        f"`{SELECTED}`",
        f"`{FAILED}`",
    ]
    assert all(len(row) == len(entry.table[0]) for row in entry.table)
    # an escaped `|` in a cell is the character again, not a border
    assert entry.table[3][6].startswith("failed: " + ERROR[:30])
    assert not any(t.lstrip().startswith("|") for t in entry.text)
