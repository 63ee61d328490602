"""The audit report rendered by a real headless browser (chromium-headless-shell --dump-dom): the text a privacy
officer reads holds every audit-grade element, and every plot decodes as an image."""

from __future__ import annotations

import hashlib
import random
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from sidecar.tools.audit import report

BROWSER = shutil.which("chromium-headless-shell") or (
    "/usr/bin/chromium-headless-shell" if Path("/usr/bin/chromium-headless-shell").is_file() else None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="chromium-headless-shell is not installed (./run setup installs it)"
)
HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
CONFIG = Path(__file__).parents[2] / "config" / "k-anonymity.yaml"
#: Appended to a copy of the page: after load, one word per <img>, what the browser made of it.
PROBE = (
    "<script>window.addEventListener('load',()=>{const p=document.createElement('p');p.id='imgcheck';"
    "p.textContent='IMAGES: '+[...document.images].map(i=>i.complete&&i.naturalWidth>0?'decoded':'broken').join(' ');"
    "document.body.appendChild(p);});</script>"
)


def render(page: Path) -> str:
    """The page's DOM after the browser loaded it (scripts run), as text with tags removed."""
    probed = page.with_suffix(".probe.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    assert BROWSER is not None
    out = subprocess.run(
        [BROWSER, "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "<h1>Query log privacy audit</h1>" in out, "the browser rendered the report"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", out.split("<body>", 1)[1]))


def images(text: str) -> list[str]:
    """What the browser made of each <img>: ``decoded`` (loaded, with a width) or ``broken``."""
    return text.rsplit("IMAGES: ", 1)[1].split() if "IMAGES: " in text else []


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def categorise(queries: list[str]) -> list[str | None]:
    """Test knowledge base: the first word names the category."""
    return [q.split()[0].capitalize() if q.strip() else None for q in queries]


def microaggregate_by_hand(src: Path, dst: Path, k: int) -> None:
    """Users in id order, in groups of k (the last takes the rest); every member gets the same aggregate: every
    k-th record of the group's pooled records, under their own id (the papers' output shape, no MDAV)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    by_user: dict[str, list[list[str]]] = {}
    for line in lines[1:]:
        cells = line.split("\t")
        by_user.setdefault(cells[0], []).append(cells)
    users = sorted(by_user)
    groups = [users[i : i + k] for i in range(0, len(users) - len(users) % k, k)]
    if len(users) % k:
        groups[-1] += users[len(users) - len(users) % k :]
    out = [lines[0]]
    for group in groups:
        pooled = [cells for u in group for cells in by_user[u]][::k]
        out += ["\t".join([u, *cells[1:]]) for u in group for cells in pooled]
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")


def test_microaggregated_report_in_a_browser(tmp_path: Path) -> None:
    """A generated log microaggregated at k=3, audited with --params: the rendered page names both files with size
    and SHA-256, the date, the version, the parameters, the measures with their method and paper in plain words,
    a verdict per guarantee with its figure, the identifiers check, the microaggregation measures and tables;
    all seven plots decode."""
    from sidecar.cli import main
    from sidecar.tools.audit.provenance import version

    src, dst, page = tmp_path / "gen30.tsv", tmp_path / "gen30-mdav-k3.tsv", tmp_path / "report.html"
    runner = CliRunner()
    assert runner.invoke(main, ["generate", "-n", "30", "-o", str(src)]).exit_code == 0
    microaggregate_by_hand(src, dst, 3)
    args = ["audit", "--original", str(src), "--protected", str(dst), "--html", str(page)]
    res = runner.invoke(main, [*args, "--params", "method=mdav,k=3,seed=1"])
    assert res.exit_code == 0, res.output
    text = render(page)
    for must in (
        "gen30.tsv",
        "gen30-mdav-k3.tsv",
        f"{src.stat().st_size:,} bytes",
        f"{dst.stat().st_size:,} bytes",
        sha(src),
        sha(dst),
        datetime.now(UTC).strftime("%Y-%m-%d"),
        f"querylog-sidecar {version()}",
        "method = mdav, k = 3, seed = 1",
        # plain words beside the names
        "De-anonymizer 1 (paper 001 Algorithm 3): pairs a random user of the rebuilt buffer",
        "replayed in time order",
        "Jensen-Shannon divergence of category profiles, paper 004 eq. 9-11",
        "Profile Exposure Level (PEL) paper 003 §4.1",
        "Information Loss Ratio (ILR) paper 003 §4.2",
        "Semantic Remain Percentage (SRP) paper 002 eq. 4",
        "Rand index of clusterings paper 003 §4.4",
        "Jaccard index of clusterings",
        # verdicts with their figures
        "Verdict per guarantee",
        "User k-anonymity, k = 3 (from --params)",
        "smallest group of identical protected profiles",
        "PEL close to the 1/k line = 33.3%",
        "SRP above the 1/k random-partition bound",
        # identifiers, events
        "Identifiers left in the output",
        "No identifier from a user's own queries released",  # issue 22 items 4, 5: identifiers by origin
        "No identifier copied from one user to another",
        "Events held or dropped, and why",
        "microaggregation: every user gets their cluster's aggregated queries",
        # measures and tables
        "Microaggregation measures (original vs protected)",
        "L1: mean",
        "L3: mean",
        "κ clusters",
        "query (original top 10)",
        "word (original top 10)",
    ):
        assert must in text, must
    assert images(text) == ["decoded"] * 7


def test_chain_report_with_config_identifiers_and_a_line_crossed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-paired log with identifiers left in it, audited with --config: the page shows the config's text and
    SHA-256, what its filters hold or drop, the identifier counts per type (never a value), the best attack with
    paper 001's line as a reference beside it (not a guarantee: issue 22 item 3), and the emails re-paired to
    other users as identifiers copied between users; the headline is not green."""
    from sidecar.cli import main

    rng = random.Random(4)
    topics = ["arts", "health", "sports", "games"]
    rows = []
    for u in range(40):
        for j in range(12):
            q = f"{rng.choice(topics)} thing {u}-{j}"
            if j == 0 and u % 4 == 0:
                q = f"{q} mail someone{u}@example.org"
            rows.append((str(1000 + u), q, f"2006-03-01 {j:02d}:00:00"))
    by_topic: dict[str, list[int]] = {}
    for i, (_, q, _) in enumerate(rows):
        by_topic.setdefault(q.split()[0], []).append(i)
    protected = list(rows)
    for idx in by_topic.values():  # each query goes to the user of another record of its topic
        users = [rows[i][0] for i in idx]
        rng.shuffle(users)
        for i, user in zip(idx, users):
            protected[i] = (user, rows[i][1], rows[i][2])
    src, dst, page = tmp_path / "in.tsv", tmp_path / "out.tsv", tmp_path / "chain.html"
    for path, data in ((src, rows), (dst, protected[:-7])):
        path.write_text(HEADER + "\n" + "".join(f"{u}\t{q}\t{t}\t\t\n" for u, q, t in data))
    monkeypatch.setattr(report, "classifier_paths", lambda: categorise)
    res = CliRunner().invoke(
        main,
        ["audit", "--original", str(src), "--protected", str(dst), "--config", str(CONFIG), "--html", str(page)],
    )
    assert res.exit_code == 0, res.output
    text = render(page)
    for must in (
        "in.tsv",
        "out.tsv",
        sha(src),
        sha(dst),
        "k-anonymity.yaml",
        sha(CONFIG),
        "category_buffer: k: 5",  # the config's own text
        "Records missing from the protected log (held or dropped) 7",
        "category_buffer holds each event until its category's buffer has k = 5 events",
        "emptied: drop drops it",
        "Identifiers left in the output",
        "Protected records with an identifier:",
        "email",
        "reference: paper 001's best attack at its lowest k, 1.89%",
        "about 650,000 users",
        "No identifier copied from one user to another attention",
    ):
        assert must in text, must
    assert "example.org" not in text.split("Identifiers left in the output")[1].split("Attacks")[0]
    assert text.split("Query log privacy audit", 1)[1].lstrip().startswith("Attention")
    assert images(text) == ["decoded"] * 7
