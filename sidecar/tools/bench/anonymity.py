"""``querylog bench anonymity``: the privacy/utility table of paper 001's anonymizer, for several k.

For each log and each k: replay the log through scrub -> classify ->
category_buffer(k) -> profile (a fresh state store each time), then audit the
output against the input with the same knowledge base (the attacker's k is the
same k). Printed per row: matching (user, query) records, the best of the eight
de-anonymizers (1-4, with and without time order), the mean per-user profile
JSD, and the events still held at the end. Logs: the AOL sample when
``../shared/data`` is present, and a generated log (``querylog generate``).

Every input line gets an ``EventID`` column first (it travels with the query
through the buffer, as a request id would), so the audit also scores the
attacks per record: the share of queries put back with their own sender,
which coincidences between users who type the same text do not inflate. The
identical-records share (paper 001's measure) needs no such column.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from sidecar.commandkit import needs_extras

REPO = Path(__file__).resolve().parents[3]
AOL_SAMPLE = REPO / ".." / "shared" / "data" / "aol-sample.tsv"

CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema: {{format: tsv, header: true}}
logging: {{level: warning, format: json}}
filters:
{scrub}  - classify: {{kb_path: {kb}}}
  - category_buffer: {{k: {k}, time: {time}}}
  - profile: {{}}
"""


def protect(
    src: Path, out: Path, work: Path, k: int, scrub: bool, time_mode: str, seed: int | None, kb: Path, prescan: bool
) -> dict[str, Any]:
    """Replay ``src`` through the k-anonymity chain into ``out``; returns the replay summary figures."""
    from sidecar.config import load_config
    from sidecar.drive import replay

    work.mkdir(parents=True, exist_ok=True)
    cfg_path = work / f"k{k}.yaml"
    cfg_path.write_text(
        CHAIN.format(
            state=work / f"state-k{k}", k=k, time=time_mode, kb=kb, scrub="  - hipaa_scrub: {}\n" if scrub else ""
        )
    )
    t0 = time.perf_counter()
    summary = replay(load_config(cfg_path), str(src), str(out), seed=seed, prescan=prescan)
    return {
        "seconds": time.perf_counter() - t0,
        "held": summary.events_held,
        "in": summary.events_in,
        "out": summary.events_out,
        "dropped": summary.events_dropped,
        "state": work / f"state-k{k}",
    }


def drained_pairs(state_dir: Path) -> list[tuple[str, str]]:
    """(user, query) of the events still held, paired inside their buckets as draining them would pair them.

    Each bucket holds as many user halves as query halves, so every held user
    gets one query of the same bucket: what the user is still owed.
    """
    from filters.category_buffer.store import HeldStore, unpack_event
    from sidecar.state import StateStore

    users: dict[str, list[str]] = {}
    queries: dict[str, list[str]] = {}
    state = StateStore(state_dir)
    try:
        rows, _ = HeldStore(state).load()
    finally:
        state.close()
    for _, ubucket, qbucket, _, blob in rows:
        ev, _ = unpack_event(blob)
        if ubucket is not None:
            users.setdefault(ubucket, []).append(str(ev.user))
        if qbucket is not None:
            queries.setdefault(qbucket, []).append(str(ev.query))
    return [pair for bucket, held in users.items() for pair in zip(held, queries.get(bucket, []))]


def drained_jsd(src: Path, out: Path, state_dir: Path, categorise: Any, cache: dict[str, str]) -> float:
    """Mean per-user profile JSD between the input and the output plus the drained held events.

    ``cache`` holds the categories the audit already gave the two logs' queries.
    """
    from sidecar.tools.audit import utility
    from sidecar.tools.audit.logs import Record, read_log
    from sidecar.tools.audit.report import categories_of

    original, _ = read_log(str(src))
    protected, _ = read_log(str(out))
    protected += [Record(user, query, "", "") for user, query in drained_pairs(state_dir)]
    return float(
        utility.compare(
            utility.profiles((r.user, c) for r, c in zip(original, categories_of(original, categorise, cache))),
            utility.profiles((r.user, c) for r, c in zip(protected, categories_of(protected, categorise, cache))),
        )["profile_jsd"]
    )


EVENT_ID = "EventID"


def with_event_ids(src: Path, dst: Path) -> Path:
    """A copy of an AOL-format TSV log with an ``EventID`` column (``e1``, ``e2``… in line order)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    width = len(header)
    out = ["\t".join([*header, EVENT_ID])]
    for n, line in enumerate(lines[1:], 1):
        cells = line.split("\t")
        cells += [""] * (width - len(cells))
        out.append("\t".join([*cells, f"e{n}"]))
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dst


def time_sorted(src: Path, dst: Path) -> Path:
    """A copy of an AOL-format TSV log with its records in time order (stable): what a live stream sees."""
    lines = src.read_text(encoding="utf-8").splitlines()
    header, body = lines[0], lines[1:]
    time_col = header.split("\t").index("QueryTime")
    body.sort(key=lambda line: line.split("\t")[time_col] if line.count("\t") >= time_col else "")
    dst.write_text(header + "\n" + "\n".join(body) + "\n", encoding="utf-8")
    return dst


def table(
    logs: list[tuple[str, Path]],
    ks: list[int],
    scrub: bool,
    time_mode: str,
    seed: int | None,
    audit_seed: int,
    prescan: bool,
) -> list[dict[str, Any]]:
    from sidecar.tools.audit.report import classifier_categorise, run_audit

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kb = work / "kb.qlkb"  # a private knowledge base: built once by this process, shared by nobody
        categorise = classifier_categorise(kb)
        for name, src in logs:
            for k in ks:
                out = work / f"{name}-k{k}.tsv".replace("/", "-")
                rep = protect(src, out, work / f"{name}-k{k}".replace("/", "-"), k, scrub, time_mode, seed, kb, prescan)
                cache: dict[str, str] = {}
                audit = run_audit(
                    str(src),
                    str(out),
                    categorise=categorise,
                    k=k,
                    seed=audit_seed,
                    cache=cache,
                    instance_field=EVENT_ID,
                )
                rows.append(
                    {
                        "log": name,
                        "k": k,
                        "events": rep["in"],
                        "released": rep["out"],
                        "held": rep["held"],
                        "dropped": rep["dropped"],
                        "replay_seconds": round(rep["seconds"], 2),
                        "matching_records": audit["matching_records"],
                        "matching_full_records": audit["matching_full_records"],
                        "matching_own_sender_records": audit["matching_own_sender_records"],
                        "best_deanonymizer": audit["best_deanonymizer"]["name"],
                        "best_recovered_share": audit["best_deanonymizer"]["recovered_share"],
                        "chance_share": audit["chance_share"],
                        "best_records_deanonymizer": audit["best_records_deanonymizer"]["name"],
                        "best_recovered_records_share": audit["best_records_deanonymizer"]["recovered_records_share"],
                        "chance_records_share": audit["chance_records_share"],
                        "best_recovered_identical_share": audit["best_identical_deanonymizer"][
                            "recovered_identical_share"
                        ],
                        "profile_jsd": audit["profile_jsd"],
                        "profile_jsd_drained": drained_jsd(src, out, rep["state"], categorise, cache),
                        "profile_unchanged_share": audit["profile_unchanged_share"],
                        "deanonymizers": {n: v["recovered_share"] for n, v in audit["deanonymizers"].items()},
                        "deanonymizers_records": {
                            n: v["recovered_records_share"] for n, v in audit["deanonymizers"].items()
                        },
                    }
                )
    return rows


@needs_extras("audit")
@click.command("anonymity")
@click.option("--ks", default="2,5,10,20", show_default=True, help="Comma-separated k values.")
@click.option("--users", default=10_000, show_default=True, help="Users of the generated log (0: skip it).")
@click.option("--aol/--no-aol", default=True, show_default=True, help="Include ../shared/data/aol-sample.tsv.")
@click.option(
    "--log",
    "extra",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Another AOL-format TSV log to include.",
)
@click.option("--scrub/--no-scrub", default=True, show_default=True, help="Run hipaa_scrub first.")
@click.option(
    "--time",
    "time_mode",
    type=click.Choice(["release", "query", "user"]),
    default="release",
    show_default=True,
    help="category_buffer's time option.",
)
@click.option(
    "--order",
    type=click.Choice(["file", "time", "both"]),
    default="both",
    show_default=True,
    help="Stream the logs as stored (AOL files: user after user) and/or sorted by time (a live stream).",
)
@click.option(
    "--prescan/--no-prescan",
    default=True,
    show_default=True,
    help="Replay with a first pass (archive mode: no (user, query) pair re-created); "
    "--no-prescan shows a live stream, which only knows the past.",
)
@click.option("--seed", default=None, type=int, help="Seed the buffer's draws (default: CSPRNG).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def COMMAND(
    ks: str,
    users: int,
    aol: bool,
    extra: tuple[str, ...],
    scrub: bool,
    time_mode: str,
    order: str,
    prescan: bool,
    seed: int | None,
    as_json: bool,
) -> None:
    """Matching records, best de-anonymizer, profile JSD and events held, per log and k."""
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    k_values = [int(x) for x in ks.split(",") if x.strip()]
    logs: list[tuple[str, Path]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if aol and AOL_SAMPLE.exists():
            logs.append(("aol-sample", AOL_SAMPLE.resolve()))
        if users:
            from sidecar.tools.generate.synthetic import generate_log

            gen = Path(tmp) / f"generated-{users}.tsv"
            with gen.open("w", encoding="utf-8") as fh:
                generate_log(users, 1, fh)
            logs.append((f"generated-{users}u", gen))
        logs += [(Path(p).stem, Path(p)) for p in extra]
        logs = [(name, with_event_ids(src, Path(tmp) / f"{i}-ids.tsv")) for i, (name, src) in enumerate(logs)]
        if order != "file":
            by_time = [
                (f"{name}/time", time_sorted(src, Path(tmp) / f"{i}-by-time.tsv")) for i, (name, src) in enumerate(logs)
            ]
            logs = by_time if order == "time" else logs + by_time
        rows = table(logs, k_values, scrub, time_mode, seed, audit_seed=0, prescan=prescan)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        f"{'log':<26} {'k':>3} {'events':>9} {'held':>6} {'matching':>9} {'own':>4} {'best attack':<18} "
        f"{'pairs':>8} {'chance':>7} {'records':>8} {'chance':>7} {'ident':>7} {'1/k':>6} {'JSD':>7} "
        f"{'drained':>7} {'unchanged':>9}"
    )
    for r in rows:
        click.echo(
            f"{r['log']:<26} {r['k']:>3} {r['events']:>9,} {r['held']:>6,} {r['matching_records']:>9,} "
            f"{r['matching_own_sender_records']:>4,} "
            f"{r['best_deanonymizer']:<18} {100 * r['best_recovered_share']:>7.3f}% "
            f"{100 * r['chance_share']:>6.2f}% {100 * r['best_recovered_records_share']:>7.3f}% "
            f"{100 * r['chance_records_share']:>6.3f}% {100 * r['best_recovered_identical_share']:>6.3f}% "
            f"{100 / r['k']:>5.1f}% "
            f"{r['profile_jsd']:>7.4f} {r['profile_jsd_drained']:>7.4f} "
            f"{100 * r['profile_unchanged_share']:>8.1f}%"
        )
    click.echo(
        f"replay {'with' if prescan else 'without'} --prescan; JSD: output as released; drained: output "
        "plus the held events paired inside their buckets (what each held user is owed)"
    )
    click.echo(
        "matching: records re-creating an original (user, query) pair; own: records carrying their own "
        "sender's query (the same event)"
    )
    click.echo(
        "pairs: original (user, query) pairs recovered by the best attack (a user who ever sent the text "
        "counts); records: queries put back with their own sender, best attack; ident: guessed records "
        "identical to an original in every field (paper 001's measure), best attack; "
        "chance: users shuffled within categories, blind to the protected log"
    )
    click.echo("paper 001 (full AOL log, lowest k): best de-anonymizer 1.89%; matching records 0")
