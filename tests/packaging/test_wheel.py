"""Installed, not only checked out: the wheel built from the repository works on its own.

The wheel (built from a copy of the working tree) goes into a fresh virtual environment outside the
repository with ``--no-deps``, its third-party dependencies linked from the interpreter running the tests
(:mod:`tests.packaging.wheelkit`), and runs from a folder outside the repository.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.packaging.wheelkit import PACKAGES, ROOT, Installed, Wheel, install

pytestmark = pytest.mark.slow

CONFIGS = ("access-log", "default", "dp", "hipaa", "k-anonymity", "passthrough")
#: Data files the runtime reads through its packages (not through the repository).
DATA_FILES = (
    "querylog_config/__init__.py",
    *(f"querylog_config/{name}.yaml" for name in CONFIGS),
    "knowledge/data/categories.yaml",
    "sidecar/tools/generate/querygen.yaml",
    "sidecar/py.typed",
)
HMAC_ENV = "QUERYLOG_HMAC_KEY"


@pytest.fixture(scope="module")
def installed(wheel: Wheel, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A venv in tmp with the wheel installed (--no-deps), the dependencies linked from this interpreter's."""
    return install(wheel, tmp_path_factory.mktemp("wheel"), linked=True)


def test_wheel_ships_every_module_and_data_file(installed: Installed) -> None:
    """The wheel holds every source file of the packages (code and data), config/ as querylog_config."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for name in DATA_FILES:
        assert name in names, name
    src = installed.source
    expected = {
        str(p.relative_to(src))
        for top in PACKAGES
        for p in (src / top).rglob("*")
        if p.is_file() and p.suffix != ".md" and "__pycache__" not in p.parts
    }
    expected |= {f"querylog_config/{p.name}" for p in (src / "config").iterdir() if p.is_file()}
    assert {"filters/hipaa_scrub/data/us_places.tsv", "knowledge/data/categories.yaml"} <= expected
    missing = expected - names
    assert not missing, f"not in the wheel (package list / package-data in pyproject.toml): {sorted(missing)}"
    top = {n.split("/")[0] for n in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {*PACKAGES, "querylog_config"}, "only the project's packages at the top level"
    entry_points = zipfile.ZipFile(installed.wheel).read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "querylog = sidecar.cli:main" in entry_points


def test_installed_packages_come_from_the_new_venv(installed: Installed) -> None:
    """Every module of the project, its plugins and its distribution load from the new venv, none from the repo."""
    probe = """
import importlib, json, sys
from importlib import metadata
for name in ("sidecar", "sidecar.cli", "filters", "adapters", "knowledge", "querylog_config"):
    importlib.import_module(name)
groups = [g for g in metadata.entry_points().groups if g.startswith("querylog.")]
loaded = [ep.load() for g in groups for ep in metadata.entry_points(group=g)]
own = ("sidecar", "filters", "adapters", "knowledge", "querylog_config")
print(json.dumps({
    "files": {n: m.__file__ for n, m in list(sys.modules.items())
              if n.split(".")[0] in own and getattr(m, "__file__", None)},
    "dist": str(metadata.distribution("querylog-sidecar").locate_file("")),
    "dists": [str(d._path) for d in metadata.distributions() if d.metadata["Name"] == "querylog-sidecar"],
    "groups": groups,
    "loaded": len(loaded),
    "editable": [str(f) for f in sys.meta_path if "editable" in type(f).__module__ + repr(f)],
    "path": sys.path,
}))
"""
    run = installed.run("python", "-c", probe)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    site = installed.site.resolve()
    for name, file in got["files"].items():
        assert Path(file).resolve().is_relative_to(site), f"{name} imported from {file}, not from {site}"
    assert set(got["files"]) >= {"sidecar.cli.core", "querylog_config", "knowledge", "filters.classify"}
    assert Path(got["dist"]).resolve() == site
    assert len(got["dists"]) == 1, got["dists"]
    assert {"querylog.commands", "querylog.filters", "querylog.sinks"} <= set(got["groups"])
    assert got["loaded"] > 20
    assert got["editable"] == []
    assert not any(p and Path(p).resolve().is_relative_to(ROOT) for p in got["path"]), got["path"]


def test_config_list_and_show(installed: Installed) -> None:
    """`querylog config list` names the six shipped configs, then the examples' files; `config show` prints each
    file as it is."""
    run = installed.run("querylog", "config", "list")
    assert run.returncode == 0, run.stderr[-2000:]
    folder = installed.source / "config" / "examples"
    examples = sorted(p for p in folder.rglob("*") if p.is_file())
    named = [f"examples/{p.relative_to(folder).as_posix().removesuffix('.yaml')}" for p in examples]
    assert run.stdout.split() == [*sorted(CONFIGS), *named]
    for name, path in zip(named, examples):
        assert installed.run("querylog", "config", "show", name).stdout == path.read_text(encoding="utf-8")
    for name in CONFIGS:
        show = installed.run("querylog", "config", "show", name)
        assert show.returncode == 0, show.stderr[-2000:]
        assert show.stdout == (installed.source / "config" / f"{name}.yaml").read_text(encoding="utf-8")
    missing = installed.run("querylog", "config", "show", "nope")
    assert missing.returncode == 2
    assert f"have: {', '.join(CONFIGS)}" in missing.stderr


def test_kb_build_check_config_and_replay_outside_the_repo(installed: Installed) -> None:
    """From a folder outside the repo: kb build, config show default > file, check-config, replay a small AOL log."""
    kb = installed.run("querylog", "kb", "build", timeout=900)
    assert kb.returncode == 0, kb.stderr[-3000:]
    assert (Path(installed.env["XDG_CACHE_HOME"]) / "querylog" / "kb.qlkb").is_file()

    show = installed.run("querylog", "config", "show", "default")
    assert show.returncode == 0, show.stderr[-2000:]
    assert HMAC_ENV in show.stdout, "the YAML names the environment variable of its HMAC key"
    config = installed.work / "default.yaml"
    config.write_text(show.stdout, encoding="utf-8")

    no_key = installed.run("querylog", "check-config", "default.yaml")
    assert no_key.returncode == 2, no_key.stdout + no_key.stderr
    assert HMAC_ENV in no_key.stderr

    key = {HMAC_ENV: "packaging-test-key-0123456789abcdef"}
    check = installed.run("querylog", "check-config", "default.yaml", extra_env=key)
    assert check.returncode == 0, check.stderr[-3000:]
    assert check.stdout.startswith("default.yaml: ok (5 filters: hipaa_scrub -> drop")

    header = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    rows = [
        "142\trentdirect.com\t2006-03-01 07:17:12\t\t",
        "142\tstaple remover\t2006-03-01 07:20:41\t1\thttp://www.staples.com/office/remover?id=7",
        "217\tlottery numbers\t2006-03-02 11:01:05\t\t",
        "217\t-\t2006-03-02 11:02:00\t\t",
        "993\tbasketball scores\t2006-03-03 19:45:30\t2\thttp://www.espn.go.com/nba/scores",
        "993\tcheap flights to paris\t2006-03-03 19:50:02\t\t",
    ]
    (installed.work / "in.tsv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    replay = installed.run("querylog", "replay", "--config", "default.yaml", "in.tsv", "-o", "out.tsv", extra_env=key)
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert "records in=6 events in=6 out=5" in replay.stderr.strip().splitlines()[-1]

    lines = (installed.work / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == header
    assert len(lines) == 1 + len(rows) - 1, "the query '-' is dropped"
    fields = [line.split("\t") for line in lines[1:]]
    assert all(len(f) == 5 and len(f[0]) == 16 and f[0].isdigit() for f in fields), "pseudonymized AnonID"
    assert [f[1] for f in fields] == [r.split("\t")[1] for r in rows if r.split("\t")[1] != "-"]
    assert fields[1][4] == "http://www.staples.com", "ClickURL cut to scheme and host"
    assert (installed.work / ".querylog-state" / "default").is_dir(), "state next to the copied config"
    assert not (installed.work.parent / ".querylog-state").exists()
