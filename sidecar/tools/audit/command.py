"""``querylog audit``: paper 001's log matcher and de-anonymizers, the utility kept, the microaggregation
measures, identifiers left, and an audit-grade HTML report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click


@click.command("audit")
@click.option("--original", required=True, type=click.Path(exists=True, dir_okay=False), help="The original log.")
@click.option("--protected", required=True, type=click.Path(exists=True, dir_okay=False), help="The protected log.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object with every figure (a query or word sent by fewer than the release's k distinct "
    "users shows its count of users and its length only, as in the HTML).",
)
@click.option(
    "--include-texts",
    is_flag=True,
    help="Keep every query and word text in --json, also those sent by fewer than k users: for your own checks, "
    "not a report to file. The HTML never shows them.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a self-contained HTML report with plots.",
)
@click.option(
    "--k",
    default=None,
    type=click.IntRange(2),
    help="The attacker's k (Algorithm 3); default: the release's k (--params k=, else the config's "
    "category_buffer k, else 5).",
)
@click.option(
    "--delta",
    default=1.2,
    show_default=True,
    type=click.FloatRange(min=1.0, min_open=True),
    help="The attacker's delta.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the attackers' random picks.")
@click.option(
    "--config",
    "-c",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Read both logs with this config's schema (default: AOL TSV / JSON lines by extension).",
)
@click.option(
    "--instance-field",
    default=None,
    metavar="FIELD",
    help="A field naming each query event that travels with the query (a request id): the attacks are "
    "then also scored per record, a query put back with its own sender.",
)
@click.option(
    "--dp-state",
    "dp_state",
    default=None,
    type=click.Path(exists=True),
    help="The state folder (or querylog.db) of a dp_replace run: adds epsilon spent per user and the shares of "
    "queries replaced, suppressed and dropped, from its budget ledger (with --config of a dp_replace chain, read "
    "from its state folder by default).",
)
@click.option(
    "--state-dir",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="The state folder the protection run used (default: the config's state_dir; needs --config): events "
    "still held by category_buffer, and a dp_replace chain's budget ledger.",
)
@click.option(
    "--params",
    "params_text",
    default=None,
    metavar="KEY=VALUE,...",
    help="The protection run's parameters, recorded in the report (e.g. method=mdav,k=3,seed=7). k (an integer "
    ">= 2) is the release's k: the microaggregation's k (the 1/k lines of PEL and SRP, the k-anonymity verdict), "
    "the attacker's default k, and the fewest distinct users a text needs to be printed.",
)
def audit_cmd(
    original: str,
    protected: str,
    as_json: bool,
    include_texts: bool,
    html_path: str | None,
    k: int | None,
    delta: float,
    seed: int,
    config_file: str | None,
    instance_field: str | None,
    dp_state: str | None,
    params_text: str | None,
    state_dir: str | None,
) -> None:
    """Measure re-identification risk and utility of a protected log against its original.

    Paper 001's log matcher and attacks, the profile divergence, the microaggregation measures (PEL, ILR, SRP,
    Rand/Jaccard, top-10 tables; papers 003, 002), identifiers left (hipaa_scrub's detectors, counts per type),
    a verdict per guarantee, and the files' sizes and SHA-256 with the date and version. A query or word sent by
    fewer than the release's k distinct users is never printed (its count of users and length only).
    """
    from sidecar.commandkit import load
    from sidecar.logs import configure_logging
    from sidecar.tools.audit.provenance import ParamsError, parse_params
    from sidecar.tools.audit.report import AuditInputError, classifier_paths, json_view, render_html, run_audit

    configure_logging("info", "auto")  # to stderr: a knowledge-base rebuild's log lines never mix into --json
    try:
        params = parse_params(params_text)
    except ParamsError as exc:
        click.echo(f"audit: {exc}", err=True)
        sys.exit(2)
    if state_dir is not None and config_file is None:
        click.echo("audit: --state-dir needs --config (the chain says what its state holds)", err=True)
        sys.exit(2)
    schema = load(config_file).sidecar.schema if config_file else None
    try:
        categorise = classifier_paths()
    except (ImportError, OSError) as exc:
        click.echo(f"audit: the classifier is not available ({type(exc).__name__})", err=True)
        sys.exit(2)
    try:
        result = run_audit(
            original,
            protected,
            categorise=categorise,
            k=k,
            delta=delta,
            seed=seed,
            schema=schema,
            instance_field=instance_field,
            config_file=config_file,
            params=params,
            include_texts=include_texts,
            state_dir=state_dir,
        )
    except AuditInputError as exc:
        click.echo(f"audit: {exc}", err=True)
        sys.exit(2)
    dp_state = dp_state or _chain_dp_state(result, config_file, state_dir)
    if dp_state is not None:
        from sidecar.tools.audit.dp import DpStateError, dp_summary

        try:
            result["dp"] = dp_summary(dp_state)
        except DpStateError as exc:
            click.echo(f"audit: {exc}", err=True)
            sys.exit(2)
    if html_path:
        Path(html_path).write_text(render_html(result), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(json_view(result), indent=2, sort_keys=True))
        return
    _summary_lines(result)
    if html_path:
        click.echo(f"report: {html_path}")


def _chain_dp_state(result: dict[str, Any], config_file: str | None, state_dir: str | None) -> str | None:
    """The state folder whose dp_replace ledger the audit reads: ``--state-dir`` or the config's, when the
    config's chain has dp_replace; None otherwise."""
    if config_file is None or "dp_replace" not in result["events"]["filters"]:
        return None
    from sidecar.commandkit import load

    return str(state_dir if state_dir is not None else load(config_file).state_dir)


def _summary_lines(result: dict[str, Any]) -> None:
    """The text summary: records, matches, every attack, the profile divergence, the dp budget, the
    microaggregation measures and a verdict per guarantee."""
    k = result["release_k"]
    best = result["best_deanonymizer"]
    empty, bad = result["empty_queries"], result["undecodable_lines"]
    click.echo(
        f"records: original {result['records_original']:,}, protected {result['records_protected']:,} "
        f"(empty queries: {empty['original']:,} / {empty['protected']:,}; "
        f"undecodable lines left out: {bad['original']:,} / {bad['protected']:,})"
    )
    click.echo(
        f"matching (user, query) records: {result['matching_records']:,} "
        f"({100 * result['matching_share']:.3f}%); identical records: {result['matching_full_records']:,}"
        + (
            f"; records carrying their own sender's query: {result['matching_own_sender_records']:,}"
            if "matching_own_sender_records" in result
            else ""
        )
    )
    for name, v in result["deanonymizers"].items():
        per_record = (
            f"  records {v['recovered_records']:>8,}  {100 * v['recovered_records_share']:7.3f}%"
            if "recovered_records" in v
            else ""
        )
        click.echo(f"  {name:<18} pairs {v['recovered']:>8,}  {100 * v['recovered_share']:7.3f}%{per_record}")
    click.echo(
        f"best attack: {best['name']} {100 * best['recovered_share']:.3f}% of pairs (1/k = {100 / k:.2f}%, "
        f"release k = {k} from {result['release_k_source']}; "
        f"blind guess within categories = {100 * result['chance_share']:.3f}%)"
    )
    ident = result["best_identical_deanonymizer"]
    click.echo(
        f"best attack, identical records (paper 001's measure): {ident['name']} "
        f"{100 * ident['recovered_identical_share']:.3f}%"
    )
    if "best_records_deanonymizer" in result:
        rec = result["best_records_deanonymizer"]
        click.echo(
            f"best attack per record: {rec['name']} {100 * rec['recovered_records_share']:.3f}% of records "
            f"put back with their own sender (blind guess = {100 * result['chance_records_share']:.3f}%; "
            f"{result['instance']['field']} unique on {100 * result['instance']['unique_share']:.1f}%)"
        )
    click.echo(
        f"profile JSD (mean per user): {result['profile_jsd']:.4f}; "
        f"unchanged profiles: {100 * result['profile_unchanged_share']:.1f}%"
    )
    if "dp" in result:
        from sidecar.tools.audit.dp import text_lines

        for line in text_lines(result["dp"]):
            click.echo(line)
    _microaggregation_lines(result)
    from sidecar.tools.audit.verdicts import guarantees

    for g in guarantees(result):
        click.echo(f"[{g['status'].replace('_', ' ')}] {g['guarantee']}: {g['figure']}")


def _microaggregation_lines(result: dict[str, Any]) -> None:
    """The text summary of the microaggregation measures and the identifiers check."""
    m = result["microaggregation"]
    if m["users_compared"]:
        srp = ", ".join(f"{lvl} {100 * v['mean']:.1f}%" for lvl, v in m["srp"].items())
        clus = ", ".join(f"κ={c['kappa']} {c['rand']:.3f}/{c['jaccard']:.3f}" for c in m["clustering"])
        click.echo(
            f"microaggregation measures (papers 003, 002; "
            f"{'looks microaggregated' if m['looks_microaggregated'] else 'not microaggregated'}) "
            f"over {m['users_compared']:,} users: PEL {100 * m['pel']['mean']:.1f}%, "
            f"ILR {100 * m['ilr']['mean']:.1f}%; SRP {srp or 'n/a'}; Rand/Jaccard {clus or 'n/a'}; "
            f"smallest group of identical profiles {m['identical_groups']['smallest']}"
        )
    state = result["events"].get("held_in_state")
    if state is not None and "held_events" in state:
        click.echo(f"events still held by category_buffer (its state database): {state['held_events']:,}")
    ids = result.get("identifiers")
    if ids is not None:
        p = ids["protected"]
        types = ", ".join(f"{t} {n:,}" for t, n in p["records_by_type"].items()) or "none"
        click.echo(f"identifiers left in protected queries: {p['records_with_identifier']:,} records ({types})")
        f = ids.get("fields", {}).get("protected")
        if f is not None:
            where = "; ".join(
                f"{n} " + ", ".join(f"{t} {c:,}" for t, c in ts.items()) for n, ts in f["by_field"].items()
            )
            click.echo(
                f"identifiers left in other fields: {f['field_values_with_identifier']:,} values ({where or 'none'})"
            )
