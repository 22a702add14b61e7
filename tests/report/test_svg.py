"""The inline SVG charts of report.html: text is escaped, numbers land on the axes."""

from __future__ import annotations

from tuneloop.report import svg


def test_forest_escapes_labels_and_draws_one_interval_per_row() -> None:
    rows = [
        svg.ForestRow("all", 0.1, 0.02, 0.2, bold=True),
        svg.ForestRow("<b>tag</b>", -0.05, -0.1, 0.01),
    ]
    out = svg.forest(rows)
    assert "<b>" not in out and "&lt;b&gt;tag&lt;/b&gt;" in out
    assert out.count('class="ci"') == 2 and 'class="zero"' in out
    assert out.startswith("<svg") and out.endswith("</svg>")


def test_lines_draw_bands_and_a_legend_for_two_series() -> None:
    a = svg.Series("pre", [1, 2, 3], [0.2, 0.3, 0.4], [0.1, 0.2, 0.3], [0.3, 0.4, 0.5])
    b = svg.Series('post"', [1, 2, 3], [0.3, 0.5, 0.6])
    out = svg.lines([a, b], x_label="k", y_label="pass@k", y_range=(0.0, 1.0))
    assert out.count("<polyline") == 2 and out.count("<polygon") == 1
    assert "post&quot;" in out


def test_lines_of_nothing_is_empty() -> None:
    assert svg.lines([], x_label="x", y_label="y") == ""


def test_a_small_multiple_with_a_mark_inside_its_range() -> None:
    s = svg.Series("grpo", [1, 2, 3, 4], [0.5, 0.6, 0.0, 0.0])
    out = svg.lines(
        [s],
        x_label="step",
        y_label="reward",
        width=360,
        marks=[svg.Mark(2, "<walked> back"), svg.Mark(9, "outside")],
    )
    assert out.startswith('<svg viewBox="0 0 360 240" width="360"')
    assert out.count('class="zero"') == 1 and "outside" not in out
    assert "&lt;walked&gt; back" in out and "<walked>" not in out
    # the mark sits where step 2 does: a third of the way along the x axis (64 to 340)
    assert 'x1="156.0" x2="156.0"' in out
