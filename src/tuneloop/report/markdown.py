"""delta.md: the delta report for people. Pure text from a `DeltaReport`.

`diagnosis_lines` (why items got worse) is shared with the capstone's report.md. Model output
appears only inside code spans, where a Markdown viewer shows it as text.
"""

from __future__ import annotations

import re

from tuneloop.report.diagnosis import MEANING
from tuneloop.report.record import CAUSES, ArmSummary, DeltaReport, Diagnosis


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _num(x: float | None, fmt: str = ".4f") -> str:
    return "—" if x is None else format(x, fmt)


def _p(p: float) -> str:
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.2e}"


def _arm_row(name: str, arm: ArmSummary) -> str:
    return (
        f"| {name} | `{arm.model}` | {arm.mean:.4f} | {_ci(arm.wilson_ci)} | "
        f"{_num(arm.clustered_se)} | {arm.ok} | {arm.missing} | {arm.harness_error} |"
    )


TRUNCATION_GAP = 0.05
"""A difference in the share of truncated completions above which delta.md warns."""


def _finish_lines(r: DeltaReport) -> list[str]:
    """Finish reasons per arm: a Δ between arms truncated at different rates is partly a
    decoding-length effect, not a quality one."""
    reasons = sorted(set(r.pre.finish_reasons) | set(r.post.finish_reasons))
    if not reasons:
        return []
    rows = [
        "## Finish reasons",
        "",
        "| arm | " + " | ".join(f"`{x}`" for x in reasons) + " | share hitting max_tokens |",
        "|---|" + "---|" * (len(reasons) + 1),
    ]
    for name, arm in (("pre", r.pre), ("post", r.post)):
        counts = " | ".join(str(arm.finish_reasons.get(x, 0)) for x in reasons)
        share = "—" if arm.length_share is None else f"{arm.length_share:.1%}"
        rows.append(f"| {name} | {counts} | {share} |")
    a, b = r.pre.length_share, r.post.length_share
    if a is not None and b is not None and abs(a - b) > TRUNCATION_GAP:
        rows += [
            "",
            f"**Warning:** {a:.1%} of pre and {b:.1%} of post completions hit max_tokens; "
            "part of Δ may come from where decoding stopped rather than from training.",
        ]
    return [*rows, ""]


def render_markdown(r: DeltaReport) -> str:
    """The whole delta.md."""
    conf = f"{r.settings.confidence:.0%}"
    f = r.flips
    lines = [
        "# Delta report",
        "",
        f"Suite revision `{r.suite_revision[:12]}`"
        + (f", slice `{r.slice}`" if r.slice else "")
        + f"; {r.n_items} items × {r.n_samples} samples at temperature {r.temperature:g}"
        + (" (restricted to a subset of the logs' items)" if r.settings.items_restricted else "")
        + (f"; scored by `{r.settings.scorer}`" if r.settings.scorer else "")
        + ".",
        "",
        f"| arm | model | mean item score | Wilson {conf} CI | clustered SE | ok | missing "
        "| harness errors |",
        "|---|---|---|---|---|---|---|---|",
        _arm_row("pre", r.pre),
        _arm_row("post", r.post),
        "",
        "## Paired difference (post − pre)",
        "",
        f"- **Δ = {r.delta:+.4f}**, {conf} paired bootstrap CI {_ci(r.delta_ci)} "
        f"({r.settings.n_resamples} item resamples, seed {r.settings.seed})",
        f"- paired permutation test ({r.permutation_method}): p two-sided = "
        f"{_p(r.p_two_sided)}, p one-sided (post > pre) = {_p(r.p_greater)}",
        f"- exact sign test on the {r.sign_wins + r.sign_losses} items that changed "
        f"({r.sign_wins} up, {r.sign_losses} down): p two-sided = {_p(r.sign_p_two_sided)}, "
        f"one-sided = {_p(r.sign_p_greater)}",
        f"- Cohen's d_z = {_num(r.d_z, '.3f')}; sd of item differences = {_num(r.sd_diff)}",
        f"- minimum detectable effect with {r.n_items} items (two-sided α = "
        f"{1 - r.settings.confidence:.2g}, power {r.settings.mde_power:.0%}): {_num(r.mde)}",
        "",
        f"Flips (an item is *right* when its item score ≥ {f.threshold:g}): "
        f"**{f.wrong_to_right} wrong → right**, **{f.right_to_wrong} right → wrong**, "
        f"{f.both_right} right in both, {f.both_wrong} wrong in both.",
        "",
    ]
    lines += _finish_lines(r) + _tag_table(r, conf) + _passk_table(r)
    lines += ["", *diagnosis_lines(r.diagnosis)]
    lines += ["Figures: `passk.png` (pass@k with bands), `items.png` (per-item scores).", ""]
    return "\n".join(lines)


def _tag_table(r: DeltaReport, conf: str) -> list[str]:
    if not r.per_tag:
        return []
    rows = [
        "## Per tag",
        "",
        f"| tag | items | pre | post | Δ | {conf} CI | p (two-sided) |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in r.per_tag:
        rows.append(
            f"| {t.tag} | {t.n_items} | {t.pre_mean:.4f} | {t.post_mean:.4f} | {t.delta:+.4f} "
            f"| {_ci(t.delta_ci)} | {_p(t.p_two_sided)} |"
        )
    return [*rows, ""]


def _passk_table(r: DeltaReport) -> list[str]:
    pk = r.passk
    shown = sorted({k for k in pk.k if k in (1, 2, 4, 8, 16, 32, 64) or k == pk.k[-1]})
    rows = [
        "## pass@k (unbiased estimator, Chen et al. 2021)",
        "",
        f"A sample is correct when its score ≥ {pk.correct_threshold:g}.",
        "",
        "| k | pre | post | Δ | Δ band |",
        "|---|---|---|---|---|",
    ]
    for k in shown:
        i = k - 1
        rows.append(
            f"| {k} | {pk.pre.value[i]:.4f} | {pk.post.value[i]:.4f} | "
            f"{pk.delta.value[i]:+.4f} | {_ci((pk.delta.low[i], pk.delta.high[i]))} |"
        )
    return rows


def _code(text: str) -> str:
    """`text` on one line as a code span (model output is shown as text, never as markup)."""
    flat = " ".join(text.split())
    if not flat:
        return "—"
    fence = "`" * (1 + max((len(m) for m in re.findall(r"`+", flat)), default=0))
    pad = " " if "`" in flat else ""  # a span may not open or close on one of its backticks
    return f"{fence}{pad}{flat}{pad}{fence}"


def _cell(text: str) -> str:
    """A table cell's text: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def diagnosis_lines(d: Diagnosis | None) -> list[str]:
    """The "Why items got worse" section: causes, suggestions, the lenient re-score, per-tag
    counts and examples (none when the report has no diagnosis)."""
    if d is None:
        return []
    lines = [
        "## Why items got worse (diagnosis)",
        "",
        f"{d.worse} items got worse and {d.still_failing} the challenger still fails "
        f"(item score < {d.threshold:g}): {d.diagnosed} of the {d.n_items} items compared. "
        "Each is given the first cause that fits, checked in the order of this table.",
        "",
        "| cause | items | of them worse | meaning |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c.cause} | {c.items} | {c.worse} | {MEANING[c.cause]} |" for c in d.causes]
    lines += ["", *(f"- **{c.cause}**: {c.suggestion}" for c in d.causes if c.items)]
    lines += ["", rescore_line(d), ""]
    if d.per_tag:
        lines += [
            "### Causes per tag",
            "",
            "| tag | " + " | ".join(CAUSES) + " |",
            "|---|" + "---|" * len(CAUSES),
        ]
        for t in d.per_tag:
            counts = " | ".join(str(t.counts.get(c, 0)) for c in CAUSES)
            lines.append(f"| {_cell(t.tag)} | {counts} |")
        lines.append("")
    return lines + _example_lines(d)


def rescore_line(d: Diagnosis) -> str:
    """The lenient re-score in one sentence (also report.html's)."""
    r = d.rescore
    if r.note is not None:
        return f"Lenient re-scoring: {r.note}; no answer was re-read."
    share = "—" if r.share is None else f"{r.share:.1%}"
    line = (
        f"Lenient re-scoring (how often the scorer itself is the problem): {r.holds_reference} "
        f"of {r.checked} failing answers checked hold the reference value ({share})"
    )
    if r.not_checked:
        line += (
            f"; {r.not_checked} failing answers not checked (no lenient reading of their "
            f"scorer): format is not ruled out for {r.not_checked_items} drift item(s)"
        )
    return line + "."


def _example_lines(d: Diagnosis) -> list[str]:
    shown = [(c.cause, e) for c in d.causes for e in c.examples]
    if not shown:
        return []
    lines = ["### Examples", ""]
    for cause, e in shown:
        lines.append(f"- **{cause}** {_code(e.item_id)}: {' '.join(e.reason.split())}")
        if e.prompt or e.reference:
            lines.append(f"  - prompt {_code(e.prompt)}; reference {_code(e.reference)}")
        lines.append(f"  - challenger {_code(e.answer)}")
    return [*lines, ""]
