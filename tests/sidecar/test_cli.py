"""The `querylog` command line: help on every command, `filters` as JSON."""

from __future__ import annotations

import json
import subprocess

import click
import pytest
from click.testing import CliRunner
from helpers import QUERYLOG, ROOT

from sidecar.cli import main


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
    return out


ALL = _commands(main)


def test_the_foundation_commands_exist() -> None:
    """serve/replay/check-config/generate/filters/bench are part of the CLI (issue 2)."""
    names = {c[0] for c in ALL}
    assert {"serve", "send", "demo", "replay", "check-config", "generate", "filters", "bench"} <= names


@pytest.mark.parametrize("path", ALL, ids=[" ".join(c) for c in ALL])
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    """`querylog ... --help` exits 0 and shows a one-line description (sqlite-utils style)."""
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help text"
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: main {' '.join(path)}")
    assert cmd.get_short_help_str(200).strip() in " ".join(result.output.split())
    undocumented = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help]
    assert not undocumented, f"{' '.join(path)}: options without help: {undocumented}"


def test_filters_lists_builtins_with_options_as_json() -> None:
    """`querylog filters` prints JSON: every filter with its entry point, summary and documented options."""
    run = subprocess.run([QUERYLOG, "filters"], capture_output=True, text=True, check=True)
    data = json.loads(run.stdout)
    by_name = {f["name"]: f for f in data["filters"]}
    assert {"pseudonymize", "truncate_url", "drop"} <= set(by_name)
    assert by_name["pseudonymize"]["entry_point"] == "filters.pseudonymize:PseudonymizeFilter"
    opts = {o["key"]: o for o in by_name["pseudonymize"]["options"]}
    assert set(opts) >= {"key_env", "key_file", "role", "output", "length", "cache_size"}
    assert opts["length"]["default"] == 16 and opts["length"]["type"] == "integer"
    assert {o["key"] for o in by_name["truncate_url"]["options"]} == {"keep_port"}
    (rules,) = by_name["drop"]["options"]
    assert rules["key"].startswith("rules") and rules["type"].startswith("list of")
    for f in data["filters"]:
        assert f["summary"] and isinstance(f["buffering"], bool)
        assert all(o["doc"] for o in f["options"])
    assert {s["name"] for s in data["sinks"]} >= {"file", "stdout"}


def test_version() -> None:
    """`querylog --version` names the package."""
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and "version" in result.output


def test_replay_missing_input_exits_2(tmp_path) -> None:  # pytest fixture
    """A missing input file is an operator error: exit 2, one line."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: s\n")
    args = [QUERYLOG, "replay", "-c", str(cfg), str(tmp_path / "nope.tsv")]
    run = subprocess.run(args, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"{tmp_path / 'nope.tsv'}: no such file"


def test_config_list_names_the_ready_chains_then_the_examples() -> None:
    """`querylog config list`: the ready chains (file stems), then every file of the examples (`examples/README.md`,
    `examples/SETUP/NAME`, a YAML file without its extension); `config show` prints an example's file as it is."""
    listed = CliRunner().invoke(main, ["config", "list"])
    assert listed.exit_code == 0, listed.output
    names = listed.output.split()
    chains = sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))
    assert names[: len(chains)] == chains
    folder = ROOT / "config" / "examples"
    examples = sorted(p for p in folder.rglob("*") if p.is_file())
    assert names[len(chains) :] == [
        f"examples/{p.relative_to(folder).as_posix().removesuffix('.yaml')}" for p in examples
    ]
    assert {"examples/README.md", "examples/fluent-bit/querylog", "examples/fluent-bit/fluent-bit.conf"} <= set(names)
    for name, path in (
        ("examples/fluent-bit/querylog", ROOT / "config" / "examples" / "fluent-bit" / "querylog.yaml"),
        ("examples/fluent-bit/fluent-bit.conf", ROOT / "config" / "examples" / "fluent-bit" / "fluent-bit.conf"),
    ):
        shown = CliRunner().invoke(main, ["config", "show", name])
        assert shown.exit_code == 0, shown.output
        assert shown.output == path.read_text(encoding="utf-8")


def test_config_show_of_an_unknown_name_lists_the_examples_too() -> None:
    """An unknown name exits 2 with the names there are, examples included."""
    shown = CliRunner().invoke(main, ["config", "show", "examples/nope/querylog"])
    assert shown.exit_code == 2
    assert "have: access-log, default, " in shown.output and "examples/fluent-bit/querylog" in shown.output
