"""`tuneloop gate`, `tuneloop champion`, `tuneloop approve`: thin typer wrappers.

    tuneloop gate --champion runs/pre/eval --challenger runs/post/eval --slice gate \\
        --suite examples/arith/suite.jsonl [--bar bar.yaml] [--ledger ledger.db]
    tuneloop champion [--ledger ledger.db] [--json]
    tuneloop approve RUN [--ledger ledger.db]
    tuneloop ledger reset LEDGER --reason "..."  [--who NAME]
    tuneloop ledger renew LEDGER --suite SUITE --item ID [--item ID …] --reason "..."
    tuneloop ledger consumed LEDGER [--items]

`gate` judges only the slice's fresh items, as the loop's gate does (`tuneloop.gate.fresh`).
With a sequence rule (`--sequence alpha_spending`, or `sequence:` in the bar file) the bar's
alpha is the whole sequence's α, and the decision is made at the α_k the rule gives this
round in the ledger (`tuneloop.gate.sequence`), spent with its verdict.

Exit status of `gate` (the table in `tuneloop.errors`): 0 promote, 1 reject or awaiting
approval (the rule said promote but `--require-approval` is set: not 0, so that
`tuneloop gate && deploy` never ships an unapproved model), 2 usage or input error
(incomparable logs, no fresh item, a changed item not declared new, bad bar).
Heavy imports (numpy, scipy via the rule) happen inside the functions.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from pydantic import create_model

from tuneloop.config import BarConfig, GateConfig, SlicingConfig, SuiteConfig
from tuneloop.config.base import Section, check_path_component
from tuneloop.config.options import leaf_fields, settings_options
from tuneloop.errors import EXIT_OK, EXIT_REJECT, InputError

if TYPE_CHECKING:
    from tuneloop.config.gate import SequenceConfig
    from tuneloop.gate.bar import BarFile

EXIT = {"promote": EXIT_OK, "reject": EXIT_REJECT, "awaiting_approval": EXIT_REJECT}
DEFAULT_LEDGER = Path("ledger.db")
LedgerOpt = Annotated[
    Path, typer.Option("--ledger", help="SQLite ledger of slices, champions and verdicts.")
]


Opt = typer.Option
BarOpt = Annotated[Path | None, Opt(help="Bar file (YAML/JSON); the default bar if omitted.")]
RunOpt = Annotated[str | None, Opt(help="Run id; default gate-<time>-<random>.")]
OutOpt = Annotated[Path | None, Opt(help="Verdict folder; default <ledger dir>/verdicts/<run>.")]
DescOpt = Annotated[Path | None, Opt(help="Champion descriptor JSON for the challenger.")]


_ITEM_CHANGES = SuiteConfig.model_fields["item_changes"]
ItemChanges: type[Section] = create_model(
    "ItemChanges",
    __base__=Section,
    item_changes=(cast(Any, _ITEM_CHANGES.annotation), _ITEM_CHANGES),
)
"""loop.yaml's `suite.item_changes`, as `tuneloop gate --item-changes` (one definition)."""


@settings_options(ItemChanges, param="changes", panel="Settings (SuiteConfig)")
@settings_options(SlicingConfig, param="slicing")
@settings_options(
    GateConfig,
    param="settings",
    skip=frozenset({"enabled", *BarConfig.model_fields}),
    defaults={"ledger": DEFAULT_LEDGER},
)
def gate(
    champion: Annotated[Path, Opt(help="Champion's sample-log folder.")],
    challenger: Annotated[Path, Opt(help="Challenger's sample-log folder.")],
    suite: Annotated[Path, Opt(help="The suite JSONL both logs were evaluated on.")],
    bar: BarOpt = None,
    run_id: RunOpt = None,
    out: OutOpt = None,
    challenger_descriptor: DescOpt = None,
    *,
    settings: GateConfig,
    slicing: SlicingConfig,
    changes: Any,
) -> None:
    """Decide whether the challenger replaces the champion, on a slice looked at once.

    Only the slice's fresh items are judged: items an earlier verdict in the ledger looked at
    (under any suite revision) are left out, and the command says how many. None fresh, fewer
    fresh than the bar's min_items, or an item changed under a consumed id (unless
    --item-changes new, or renewed with `tuneloop ledger renew`) is refused with exit 2.
    The settings options are loop.yaml's `gate:` keys (the bar itself comes from --bar) and
    `suite:` keys.
    """
    from tuneloop.gate.bar import BarFile, load_bar
    from tuneloop.gate.fresh import fresh_items
    from tuneloop.gate.sequence import round_bar
    from tuneloop.gate.verdict import adjudicate
    from tuneloop.records import read_record
    from tuneloop.samplelog import SUMMARY_FILE, EvalSummary
    from tuneloop.suite import load_suite, resolve_slice

    if run_id is not None:
        check_path_component(run_id, "--run-id")  # it names the verdict's folder
    the_suite = load_suite(suite, slicing.default_scorer)
    for option, log in (("--champion", champion), ("--challenger", challenger)):
        if not (Path(log) / SUMMARY_FILE).is_file():
            raise InputError(
                f"{option} {log}: not a sample-log folder (no {SUMMARY_FILE} in it); "
                "`tuneloop evaluate` writes one"
            )
    for log in (champion, challenger):
        summary = read_record(Path(log) / SUMMARY_FILE, EvalSummary)
        if summary.suite_revision != the_suite.revision:
            raise InputError(
                f"{log}: evaluated on suite revision {summary.suite_revision[:12]}, but "
                f"{suite} is revision {the_suite.revision[:12]}"
            )
    ids = resolve_slice(the_suite, slicing, settings.slice)
    ledger = settings.ledger or DEFAULT_LEDGER
    run = run_id or f"gate-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    keys = load_bar(bar) if bar else BarFile()
    the_bar = round_bar(keys, _one_sequence(keys, settings, bar), ledger, run)
    changes_are_new = changes.item_changes == "new"
    if not settings.allow_slice_reuse:
        narrowed = fresh_items(
            ledger,
            settings.slice,
            the_suite,
            ids,
            (champion, challenger),
            changes_are_new,
            the_bar.min_items,
        )
        ids = narrowed.ids
        if narrowed.note():
            typer.echo(f"gate: {narrowed.note()}")
    verdict = adjudicate(
        champion,
        challenger,
        bar=the_bar,
        slice_name=settings.slice,
        item_ids=ids,
        ledger_path=ledger,
        out_dir=out or ledger.parent / "verdicts" / run,
        run_id=run,
        allow_slice_reuse=settings.allow_slice_reuse,
        require_approval=settings.require_approval,
        challenger_descriptor=_read_descriptor(challenger_descriptor),
        seed=settings.seed,
        bar_registered_at=_mtime(bar) if bar else None,
        contents={i.id: i.content_sha256 for i in the_suite.items},
        changes_are_new=changes_are_new,
    )
    print_verdict(verdict.to_json())
    raise typer.Exit(EXIT[verdict.decision])


def _one_sequence(keys: BarFile, settings: GateConfig, bar: Path | None) -> SequenceConfig | None:
    """The sequence rule: the bar file's `sequence` or `--sequence`, not two different ones."""
    given, option = keys.sequence, settings.sequence
    if given is not None and option is not None and given != option:
        raise InputError(
            f"--bar {bar} sets sequence {given.model_dump(exclude_defaults=True)} and "
            f"--sequence {option.model_dump(exclude_defaults=True)}: give the rule once"
        )
    return given or option


def _mtime(path: Path) -> str:
    stamp = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    return stamp.isoformat(timespec="seconds").replace("+00:00", "Z")


def _read_descriptor(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    from tuneloop.records import read_json

    return read_json(path)


def print_verdict(v: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from tuneloop.gate.verdict_record import CostResult, JudgeNote

    table = Table("condition", "ok", "detail", title=f"gate verdict — run {v['run_id']}")
    for c in v["conditions"]:
        table.add_row(c["name"], "yes" if c["passed"] else "NO", c["detail"])
    console = Console()
    console.print(table)
    if v.get("cost"):
        console.print(CostResult.model_validate(v["cost"]).sentence(), markup=False)
    if v.get("judge"):
        console.print(JudgeNote.model_validate(v["judge"]).sentence(), markup=False)
    if v.get("slice_reuse"):
        earlier = ", ".join(v["slice_reuse"]["previous_runs"])
        console.print(f"[yellow]slice reuse explicitly allowed; consumed before by {earlier}[/]")
    for warning in v.get("warnings", []):
        console.print(f"[yellow]warning: {warning}[/]")
    extra = f" → champion v{v['new_champion_version']}" if v.get("new_champion_version") else ""
    console.print(f"decision: [bold]{v['decision']}[/]{extra}")


def champion(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
) -> None:
    """Show the current champion and the history of champion versions."""
    from tuneloop.gate.champion import describe
    from tuneloop.gate.promotion import champion_history

    if not ledger.is_file():
        raise InputError(no_ledger(ledger))
    history = champion_history(ledger)
    if as_json:
        rows = [h.to_json() for h in history]
        typer.echo(json.dumps({"current": rows[-1] if rows else None, "history": rows}, indent=2))
        return
    if not history:
        typer.echo(f"no champion recorded in {ledger} yet")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("version", "since", "via", "run", "champion", title=f"champions — {ledger}")
    for h in history:
        table.add_row(str(h.version), h.promoted_at, h.via, h.run_id or "", describe(h.descriptor))
    console = Console()
    console.print(table)
    console.print(f"current: v{history[-1].version} — {describe(history[-1].descriptor)}")


def no_ledger(path: Path) -> str:
    """The error of a read-only command pointed at a ledger that does not exist."""
    return (
        f"{path}: no ledger here (a read-only command creates none); point it at the loop's "
        "gate.ledger (default <archive root>/ledger.db), which its gate phase or `tuneloop "
        "gate` creates"
    )


def approve(
    run: Annotated[str, typer.Argument(help="Run id of a verdict awaiting approval.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
) -> None:
    """Complete a promotion that stopped at awaiting_approval."""
    from tuneloop.gate.promotion import approve as approve_run

    version = approve_run(run, ledger)
    typer.echo(f"approved {run}: champion v{version}")


ledger_app = typer.Typer(help="Inspect or reset the gate ledger.", no_args_is_help=True)


@ledger_app.command("reset")
def reset(
    ledger: Annotated[Path, typer.Argument(help="The ledger file (gate.ledger).")],
    reason: Annotated[str, typer.Option(help="Why; written to the experiment log.")],
    who: Annotated[str | None, typer.Option(help="Who resets; default the login name.")] = None,
) -> None:
    """Start a new one-look history on purpose: earlier looks stop counting, stay on record.

    Nothing is deleted — verdicts, champions and consumed items stay in the ledger — and the
    reset (who, when, why) is appended to EXPERIMENT-LOG.md beside it.
    """
    from tuneloop.gate.promotion import default_user, reset_one_look

    at = reset_one_look(ledger, who or default_user(), reason)
    typer.echo(f"one-look history of {ledger} reset at {at}; recorded in the experiment log")


_ONLY_DEFAULT_SCORER = frozenset(
    ".".join(path) for path, _ in leaf_fields(SlicingConfig) if path != ("default_scorer",)
)


@ledger_app.command("renew")
@settings_options(SlicingConfig, param="slicing", skip=_ONLY_DEFAULT_SCORER)
def renew(
    ledger: Annotated[Path, typer.Argument(help="The ledger file (gate.ledger).")],
    suite: Annotated[Path, Opt(help="The suite JSONL that holds the changed items now.")],
    item: Annotated[
        list[str], Opt("--item", help="A changed item's id; repeat for more.", show_default=False)
    ],
    reason: Annotated[str, Opt(help="Why the item changed; written to the experiment log.")],
    who: Annotated[str | None, Opt(help="Who declares it; default the login name.")] = None,
    *,
    slicing: SlicingConfig,
) -> None:
    """Record that consumed items whose content changed are new items, with a reason.

    For each --item: it must be in --suite, looked at by a verdict since the last reset, and
    changed since (content: prompt or messages, reference, scorer and its arguments, tools;
    not tags). The change — old and new content hash, who, why — is appended to the ledger's
    item_changes table and to EXPERIMENT-LOG.md beside it. Then a run with
    suite.item_changes: refuse judges that item, with exactly that content, as a fresh item;
    any other change is still refused. Nothing is deleted, and no other item is released:
    `tuneloop ledger reset` stays the only way to look at consumed items again.
    """
    from tuneloop.gate.fresh import renew_items
    from tuneloop.gate.promotion import default_user
    from tuneloop.gate.verdict import now
    from tuneloop.suite import load_suite

    the_suite = load_suite(suite, slicing.default_scorer)
    changes = renew_items(ledger, the_suite, item, who or default_user(), reason, now())
    for c in changes:
        old = (c.old_sha256 or "-")[:12]
        typer.echo(f"{c.item_id}: content {old} → {c.new_sha256[:12]} is a new item")
    typer.echo(f"recorded in {ledger} and the experiment log beside it")


@ledger_app.command("consumed")
def consumed(
    ledger: Annotated[Path, typer.Argument(help="The ledger file (gate.ledger).")],
    items: Annotated[
        bool, typer.Option("--items", help="One line per look: item id, content hash, run.")
    ] = False,
) -> None:
    """How many items each suite revision has had looked at since the last reset, and how
    many changed items were declared new; with --items, every look with the item's content
    hash (one look holds per id and content, whatever the revision; `-` marks an old look
    recorded by id alone) and every declared change."""
    from tuneloop.gate.ledger import open_ledger

    if not ledger.exists():
        raise InputError(no_ledger(ledger))
    with open_ledger(ledger) as db:
        rows = db.consumed_summary()
        looks = db.consumed_rows() if items else []
        changes = db.item_changes()
    if not rows:
        typer.echo(f"no items consumed in {ledger} since its last reset")
    for revision, n_items, n_runs in rows:
        typer.echo(f"suite {revision[:12]}: {n_items} items looked at by {n_runs} run(s)")
    for item_id, look in looks:
        sha = look.content_sha256[:12] if look.content_sha256 else "-"
        typer.echo(
            f"{item_id}  content {sha}  suite {look.suite_revision[:12]}  run {look.run_id}  "
            f"at {look.consumed_at}"
        )
    if changes:
        typer.echo(f"{len(changes)} changed item(s) declared new items (ever; append-only)")
    for c in changes if items else []:
        by = f"run {c.run_id}" if c.run_id else "tuneloop ledger renew"
        old = (c.old_sha256 or "-")[:12]
        typer.echo(
            f"{c.item_id}  changed {old} → {c.new_sha256[:12]}  by {by}  at {c.declared_at}: "
            f"{c.reason}"
        )
