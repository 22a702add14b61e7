"""delta.md: the delta report for people. Pure text from a `DeltaReport`."""

from __future__ import annotations

from tuneloop.report.record import ArmSummary, DeltaReport


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
    lines += ["", "Figures: `passk.png` (pass@k with bands), `items.png` (per-item scores).", ""]
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
