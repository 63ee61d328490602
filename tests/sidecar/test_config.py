"""Config files: located errors `FILE:LINE: KEY: problem (allowed: ...)`, exit code 2, shipped configs load."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import QUERYLOG, ROOT

from sidecar.config import load_config
from sidecar.config.loader import ConfigError

CASES = [
    # (yaml body, expected message after "FILE:")
    (
        "filterz: []\n",
        "2: filterz: unknown key, did you mean filters? "
        "(allowed: dead_letter_file, dead_letter_max_bytes, drain_seconds, filters, flush_interval_seconds, limits, "
        "live_audit, logging, metrics, metrics_listen, schema, server, sinks, sources, state_dir)",
    ),
    ("limits:\n  batch_size: 0\n", "3: limits.batch_size: must be >= 1, got 0"),
    ("limits:\n  max_record_bytes: lots\n", "3: limits.max_record_bytes: must be an integer, got 'lots'"),
    ("schema:\n  format: csv\n", "3: schema.format: unknown value 'csv' (allowed: auto, tsv, jsonl, access_log, ubi)"),
    (
        "schema:\n  roles:\n    agent: ua\n",
        "4: schema.roles.agent: unknown key (allowed: query, rank, time, url, user)",
    ),
    ("logging:\n  level: loud\n", "3: logging.level: unknown value 'loud' (allowed: debug, info, warning, error)"),
    ("server:\n  listen: nowhere\n", "3: server.listen: must be host:port (port 0..65535), got 'nowhere'"),
    (
        "server:\n  tls_cert_file: c.pem\n",
        "3: server.tls_cert_file: Set both tls_cert_file and tls_key_file, or neither",
    ),
    ("state_dir: a\nstate_dir: b\n", "2: state_dir: duplicate key"),
    ("filters: [\n", "3: invalid YAML: expected the node content, but found '<stream end>'"),
    (
        "filters:\n  - truncate_url: {keep_port: maybe}\n",
        "3: filters[0].truncate_url.keep_port: must be true or false, got 'maybe'",
    ),
    (
        "filters:\n  - truncate_url: {}\n    drop: {}\n",
        "3: filters[0]: must be a mapping with exactly one key, the component name (allowed: {filters})",
    ),
    (
        'filters:\n  - drop:\n      rules:\n        - role: query\n          matches: "(unclosed"\n',
        "6: filters[0].drop.rules[0].matches: invalid regular expression: missing ), unterminated subpattern",
    ),
    (
        "filters:\n  - drop:\n      rules:\n        - role: query\n          equals: [a]\n          colour: red\n",
        "7: filters[0].drop.rules[0].colour: unknown key (allowed: empty, equals, ignore_case, matches, role)",
    ),
    (
        "filters:\n  - drop:\n      rules:\n        - {equals: [a]}\n        - {role: agent, empty: true}\n",
        "6: filters[0].drop.rules[1].role: unknown value 'agent' (allowed: user, query, time, rank, url)",
    ),
    ("filters:\n  - drop: {rules: []}\n", "3: filters[0].drop.rules: give at least one rule"),
    ("sinks:\n  - file: {path: x.tsv, fsync: 3}\n", "3: sinks[0].file.fsync: must be true or false, got 3"),
]


def _registered() -> str:
    from sidecar.api import FILTERS
    from sidecar.registry import plugins

    return ", ".join(sorted(plugins(FILTERS)))


@pytest.mark.parametrize(("body", "expected"), CASES)
def test_located_errors(body: str, expected: str, write_config: Callable[..., Path]) -> None:
    """load_config raises ConfigError whose text is FILE:LINE: KEY: problem (allowed: ...)."""
    path = write_config(f"state_dir: s\n{body}" if not body.startswith("state_dir") else body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:{expected.format(filters=_registered())}"


def test_unknown_filter_lists_the_registered_ones(write_config: Callable[..., Path]) -> None:
    """An unknown component name lists every registered filter."""
    path = write_config("state_dir: s\nfilters:\n  - nosuch: {}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:3: filters[0].nosuch: unknown component (allowed: {_registered()})"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("filterz: []\n", "2: filterz: unknown key, did you mean filters? (allowed: "),
        (
            'filters:\n  - drop:\n      rules:\n        - role: query\n          matches: "(x"\n',
            "6: filters[0].drop.rules[0].matches: invalid regular expression: missing ), unterminated subpattern",
        ),
        ("filters:\n  - nosuch: {}\n", "3: filters[0].nosuch: unknown component (allowed: "),
        ("limits:\n  batch_size: -5\n", "3: limits.batch_size: must be >= 1, got -5"),
    ],
)
def test_check_config_exits_2_with_the_message(body: str, expected: str, tmp_path: Path) -> None:
    """`querylog check-config` prints the located error on stderr, nothing on stdout, and exits 2."""
    path = tmp_path / "bad.yaml"
    path.write_text(f"state_dir: {tmp_path / 's'}\n{body}")
    run = subprocess.run([QUERYLOG, "check-config", str(path)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith(f"{path}:{expected}")
    assert run.stderr.count("\n") == 1, "one line, no traceback"


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    """A missing file is a config error too."""
    run = subprocess.run([QUERYLOG, "check-config", str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"{tmp_path / 'nope.yaml'}: cannot read config: No such file or directory"


def test_check_config_ok_names_the_chain(tmp_path: Path, hmac_key: str) -> None:
    """A good config prints its chain and exits 0."""
    path = tmp_path / "ok.yaml"
    path.write_text(f"state_dir: s\nfilters:\n  - pseudonymize: {{key_env: {hmac_key}}}\n  - truncate_url: {{}}\n")
    run = subprocess.run([QUERYLOG, "check-config", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{path}: ok (2 filters: pseudonymize -> truncate_url)"


def test_shipped_passthrough_config_loads() -> None:
    """config/passthrough.yaml has no filters and the AOL schema defaults."""
    cfg = load_config(ROOT / "config" / "passthrough.yaml")
    assert cfg.filters == ()
    assert cfg.sidecar.schema.header is True
    assert cfg.sidecar.limits.max_record_bytes == 65536


def test_relative_paths_resolve_against_the_config_folder(write_config: Callable[..., Path]) -> None:
    """state_dir is relative to the config file; the dead-letter file to state_dir."""
    path = write_config("state_dir: st\ndead_letter_file: dl.jsonl\n")
    cfg = load_config(path)
    assert cfg.state_dir == path.parent.resolve() / "st"
    assert cfg.dead_letter_path == path.parent.resolve() / "st" / "dl.jsonl"


def test_environment_variables_are_interpolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`${VAR}` and `${VAR:-default}` come from the environment before parsing, so values keep their YAML
    types; `$${` stays literal; comments are not interpolated (issue 11, defect 16)."""
    monkeypatch.setenv("QL_BATCH", "250")
    monkeypatch.delenv("QL_UNSET", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text(
        "# ${QL_NOT_NEEDED} in a comment\n"
        "state_dir: ${QL_UNSET:-st}\n"
        "limits: {batch_size: ${QL_BATCH}}\n"
        "dead_letter_file: 'dl-$${x}.jsonl'\n",
        encoding="utf-8",
    )
    cfg = load_config(path)
    assert cfg.sidecar.limits.batch_size == 250
    assert cfg.sidecar.state_dir == "st"
    assert cfg.sidecar.dead_letter_file == "dl-${x}.jsonl"


def test_an_unset_variable_is_a_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unset variable without a default names the variable and the line, never a value."""
    monkeypatch.delenv("QL_MISSING", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text("state_dir: st\nlimits: {batch_size: ${QL_MISSING}}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:2: ") and "QL_MISSING is not set" in str(err.value)


def test_check_config_touches_nothing_and_prints_only_its_verdict(tmp_path: Path) -> None:
    """check-config builds every component in a throw-away state store: no state folder, no dead-letter file,
    no log lines around the verdict (issue 11, defect 15); a mistyped component gets a suggestion."""
    config = tmp_path / "c.yaml"
    config.write_text("state_dir: st\nfilters:\n  - truncate_url: {}\nsinks:\n  - file: {path: out.tsv}\n")
    run = subprocess.run([QUERYLOG, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{config}: ok (1 filters: truncate_url)\n" and run.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]
    config.write_text("state_dir: st\nfilters:\n  - truncate_ulr: {}\n")
    run = subprocess.run([QUERYLOG, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "unknown component, did you mean truncate_url?" in run.stderr


def test_check_config_reports_every_error_in_file_order(tmp_path: Path) -> None:
    """Validation goes on after the first error: top-level keys, filter and sink options, unknown components,
    the server section and errors found while building components each get their own located line
    (issue 11, defect 15)."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "stat_dir: st\n"  # 1
        "limits:\n"
        "  batch_size: 0\n"  # 3
        "filters:\n"
        "  - hipaa_scrubb: {}\n"  # 5
        "  - drop: {rules: []}\n"  # 6
        "  - category_buffer: {k: 0, kk: 1}\n"  # 7: two errors
        "sinks:\n"
        "  - file: {pth: x}\n"  # 9
        "server:\n"
        "  workers: 0\n"  # 11
    )
    run = subprocess.run([QUERYLOG, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.splitlines()
    assert [line.split(": ")[0].rsplit(":", 1)[1] for line in lines] == ["1", "3", "5", "6", "7", "7", "9", "11"]
    assert "stat_dir: unknown key, did you mean state_dir?" in lines[0]
    assert "filters[0].hipaa_scrubb: unknown component, did you mean hipaa_scrub?" in lines[2]
    assert "sinks[0].file.pth: unknown key, did you mean path?" in lines[6]
    # once the file itself is valid, errors found while building the components are all reported too
    config.write_text(
        "state_dir: st\nfilters:\n  - pseudonymize: {key_env: QL_UNSET_A}\n  - pseudonymize: {key_env: QL_UNSET_B}\n"
    )
    run = subprocess.run([QUERYLOG, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    keys = [line.split(": ")[1] for line in run.stderr.splitlines()]
    assert keys == ["filters[0].pseudonymize.key_env", "filters[1].pseudonymize.key_env"]


def test_sources_list_and_the_deprecated_server_section(write_config: Callable[..., Path]) -> None:
    """`sources:` lists what `serve` runs; `server:` still configures the grpc source; both for grpc is an error;
    with neither, serve runs the grpc source with its defaults (issue 12's configuration shape)."""
    listed = load_config(write_config("sources:\n  - grpc: {listen: 127.0.0.1:50999}\n"))
    assert [(s.name, s.config.listen, s.path) for s in listed.sources] == [
        ("grpc", "127.0.0.1:50999", "sources[0].grpc")
    ]
    old = load_config(write_config("server:\n  listen: 127.0.0.1:50998\n"))
    assert [(s.name, s.config.listen, s.path) for s in old.sources] == [("grpc", "127.0.0.1:50998", "server")]
    assert [s.name for s in load_config(write_config("filters: []\n")).sources] == ["grpc"]
    with pytest.raises(ConfigError, match=r":4: server: the grpc source is configured twice"):
        load_config(write_config("sources:\n  - grpc: {}\nserver:\n  listen: 127.0.0.1:1\n"))
    with pytest.raises(ConfigError, match=r":3: sources\[0\]\.grcp: unknown component, did you mean grpc\?"):
        load_config(write_config("sources:\n  - grcp: {}\n"))


def test_config_errors_survive_pickling() -> None:
    """A located error raised in a Dask worker reaches the driver as itself (was a TypeError when unpickled)."""
    import pickle

    from sidecar.config.loader import ConfigError, ConfigErrors

    one = ConfigError("c.yaml", 3, "filters[0].drop.rules", "give at least one rule", ["a", "b"])
    both = ConfigErrors([one, ConfigError("c.yaml", 1, "state_dir", "not a folder")])
    for err in (one, both):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and back.line == err.line
