"""category_buffer's options as an operator writes them: located errors, the shipped config, testdata/*.yaml."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from sidecar.api import BuildContext
from sidecar.config import load_config
from sidecar.config.loader import ConfigError
from sidecar.state import StateStore

TESTDATA = Path(__file__).with_name("testdata")
PREFIX = "filters[0].category_buffer."

#: The options config_invalid.yaml gives an invalid value (one per line marked "invalid").
INVALID = {
    "k",
    "delta",
    "k_per_category.Health",
    "min_users",
    "user_draw",
    "decay",
    "level",
    "unknown",
    "user_roles",
    "time",
    "avoid_repeat_pairs",
    "max_hold",
    "max_hold_seconds",
    "max_held",
}


def test_valid_config_file_loads_every_option(tmp_path: Path) -> None:
    """testdata/config.yaml loads through load_config into exactly the options it writes, and builds the filter."""
    cfg = load_config(TESTDATA / "config.yaml")
    (spec,) = cfg.filters
    assert spec.name == "category_buffer" and spec.cls is CategoryBufferFilter
    assert spec.config == CategoryBufferConfig(
        k=7,
        delta=1.5,
        k_per_category={"Health": 10, "Kids and Teens": 12},
        min_users=3,
        user_draw="slot",
        decay=False,
        level=2,
        unknown="drop",
        category_field="category",
        user_roles=("user", "url"),
        user_fields=("ip", "session"),
        time="query",
        avoid_repeat_pairs=1000,
        max_hold="merge",
        max_hold_seconds=3600.0,
        max_held=50000,
    )
    ctx = BuildContext(config_dir=tmp_path, state=StateStore(tmp_path), rng=random.Random(1), seed=1)
    f = CategoryBufferFilter(spec.config, ctx)
    assert f.held() == 0 and f.stats()["k_per_category"] == {}


def test_invalid_config_file_reports_each_value_located() -> None:
    """Every invalid value of testdata/config_invalid.yaml is a ConfigError at FILE:LINE naming its key (the
    loader stops at the first: each reported line is blanked and the file loaded again until it loads)."""
    path = TESTDATA / "config_invalid.yaml"
    lines = path.read_text().splitlines()
    marked = {i + 1 for i, line in enumerate(lines) if "# invalid" in line}
    assert len(marked) == len(INVALID)
    reported: dict[str, int] = {}
    for _ in range(len(INVALID) + 1):
        try:
            load_config(path, text="\n".join(lines) + "\n")
        except ConfigError as err:
            assert err.key.startswith(PREFIX), str(err)
            key = err.key.removeprefix(PREFIX)
            assert key in INVALID and key not in reported, str(err)
            assert err.line in marked, str(err)
            assert lines[err.line - 1].strip().startswith(f"{key.rsplit('.', 1)[-1]}:"), str(err)
            assert str(err).startswith(f"{path}:{err.line}: {err.key}: ")
            reported[key] = err.line
            lines[err.line - 1] = ""
        else:
            break
    else:
        pytest.fail("config_invalid.yaml still does not load with every invalid line blanked")
    assert set(reported) == INVALID
    assert set(reported.values()) == marked


class TestConfig:
    @pytest.mark.parametrize(
        ("body", "key"),
        [
            ("user_roles: [url]", "user_roles"),
            ("k: 1", "k"),
            ("delta: 1.0", "delta"),
            ("max_hold: later", "max_hold"),
            ("k_per_category: {Health: 1}", "k_per_category.Health"),
        ],
    )
    def test_bad_options_are_located(self, tmp_path: Path, body: str, key: str) -> None:
        """A bad option value is a ConfigError at FILE:LINE naming the option's full key."""
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"state_dir: s\nfilters:\n  - category_buffer:\n      {body}\n")
        with pytest.raises(ConfigError) as err:
            load_config(cfg)
        assert str(err.value).startswith(f"{cfg}:4: filters[0].category_buffer.{key}")

    def test_shipped_config_loads(self) -> None:
        """config/k-anonymity.yaml loads and ends its chain with category_buffer then profile."""
        from sidecar.api import FILTERS
        from sidecar.registry import plugins

        missing = {"hipaa_scrub", "classify"} - set(plugins(FILTERS))
        if missing:
            pytest.skip(f"filters not registered yet: {sorted(missing)}")
        root = Path(__file__).resolve().parents[3]
        cfg = load_config(root / "config" / "k-anonymity.yaml")
        assert [s.name for s in cfg.filters][-2:] == ["category_buffer", "profile"]
