"""``querylog eval``: offline utility evaluations (``eval dp``: paper 004 Figures 2-4; ``eval srp``: paper 002's SRP
under WordNet's hierarchy)."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.group("eval")
def eval_group() -> None:
    """Offline evaluations of the protection methods on a log (tables, plots, JSON)."""


@eval_group.command("dp")
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for dp-eval.json, dp-eval.md, dp-eval.html and one PNG per budget (default: print only).",
)
@click.option("--runs", default=3, show_default=True, type=click.IntRange(1), help="Runs averaged per figure.")
@click.option("--seed", default=0, show_default=True, help="Seed of this measurement's draws.")
@click.option(
    "--budget",
    type=click.Choice(["user", "query", "both"]),
    default="both",
    show_default=True,
    help="user: eps per user, eps/m per concept (Proposition 3); query: eps per concept.",
)
@click.option(
    "--settings", default="A,B,C", show_default=True, help="Paper 004 settings to run (each with its D(q)=P variant)."
)
@click.option("--epsilons", default="0.1,0.5,1,2,5,10", show_default=True, help="Comma-separated epsilon values.")
@click.option(
    "--other-bin/--drop-other",
    default=True,
    show_default=True,
    help="Protected concepts outside the profile topics: count them in an extra `other` bin (a loss of profile "
    "mass), or leave them out of the profile (an emptied profile counts as JSD 1).",
)
@click.option(
    "--stay-sample",
    default=200,
    show_default=True,
    type=click.IntRange(0),
    help="Evaluation concepts sampled for the where-replacements-land table (0: skip it).",
)
@click.option("--kb", "kb_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="KB file.")
@click.option(
    "--config",
    "-c",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Read the log with this config's schema (default: AOL TSV / JSON lines by extension).",
)
def dp_cmd(
    log: str,
    out_dir: Path | None,
    runs: int,
    seed: int,
    budget: str,
    settings: str,
    epsilons: str,
    other_bin: bool,
    stay_sample: int,
    kb_path: Path | None,
    config_file: str | None,
) -> None:
    """Utility loss (mean per-user JSD of topic profiles) of SQC1, SQC2, NSQC and HBDP, paper 004 Figures 2-4."""
    from knowledge import load_kb
    from sidecar.commandkit import load
    from sidecar.tools.audit.logs import read_log
    from sidecar.tools.evaluate.dp import SETTINGS, run_evaluation
    from sidecar.tools.evaluate.dp_report import html_report, markdown, plot_png, to_json

    try:
        eps = [float(e) for e in epsilons.split(",") if e.strip()]
    except ValueError:
        click.echo("eval dp: --epsilons must be comma-separated numbers", err=True)
        sys.exit(2)
    chosen = [s.strip().upper() for s in settings.split(",") if s.strip()]
    if not eps or any(e <= 0 for e in eps) or not chosen or any(s not in SETTINGS for s in chosen):
        click.echo("eval dp: epsilons must be > 0 and settings among A, B, C", err=True)
        sys.exit(2)
    schema = load(config_file).sidecar.schema if config_file else None
    records, _bad = read_log(log, schema)
    kb = load_kb(kb_path)
    budgets = ("user", "query") if budget == "both" else (budget,)
    try:
        result = run_evaluation(
            kb,
            [(r.user, r.query) for r in records],
            epsilons=eps,
            settings=chosen,
            budgets=budgets,
            runs=runs,
            seed=seed,
            other_bin=other_bin,
            stay_sample=stay_sample,
        )
    except ValueError as exc:
        click.echo(f"eval dp: {exc}", err=True)
        sys.exit(2)
    text = markdown(result)
    click.echo(text, nl=False)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "dp-eval.json").write_text(to_json(result), encoding="utf-8")
        (out_dir / "dp-eval.md").write_text(text, encoding="utf-8")
        (out_dir / "dp-eval.html").write_text(html_report(result), encoding="utf-8")
        for b in budgets:
            (out_dir / f"dp-eval-{b}.png").write_bytes(plot_png(result, b))
        click.echo(f"written: {out_dir}/dp-eval.{{json,md,html}}, dp-eval-*.png")


@eval_group.command("srp")
@click.argument("original", type=click.Path(exists=True, dir_okay=False))
@click.argument("protected", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-k", "k", type=click.IntRange(2), default=None, help="Draw paper 002's random-partition line 1/k.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def srp_cmd(original: str, protected: tuple[str, ...], k: int | None, as_json: bool) -> None:
    """SRP (paper 002 eq. 4) of microaggregated logs under WordNet's hierarchy, a taxonomy `mdav`'s release never
    saw (the audit's SRP uses the knowledge base's categories, which `mdav` keeps above 1/k by construction)."""
    import json

    from knowledge.wordnet import locate, open_wordnet
    from sidecar.tools.audit.logs import read_log
    from sidecar.tools.evaluate.srp_wordnet import LEVELS, srp_by_level, wordnet_paths

    logs = {name: [(r.user, r.query) for r in read_log(name)[0]] for name in (original, *protected)}
    with open_wordnet(locate()) as wordnet:
        paths = wordnet_paths((q for rows in logs.values() for _, q in rows), wordnet)
    results = {name: srp_by_level(logs[original], logs[name], paths) for name in protected}
    if as_json:
        click.echo(json.dumps({"k": k, "protected": results}, indent=2, sort_keys=True))
        return
    line = f" (1/k = {100 / k:.1f}%)" if k else ""
    click.echo(
        f"SRP under WordNet's hierarchy, L1..L5{line}; queries with a path: "
        f"{100 * next(iter(results.values()))['coverage']:.1f}%"
    )
    for name, result in results.items():
        cells = " / ".join(f"{100 * result['srp'][f'L{lvl}']['mean']:.1f}" for lvl in LEVELS)
        below = [f"L{lvl}" for lvl in LEVELS if k and result["srp"][f"L{lvl}"]["mean"] < 1 / k]
        verdict = f"  under 1/k at {', '.join(below)}" if below else ("  above 1/k at every level" if k else "")
        click.echo(f"{name}: {cells}{verdict}")
