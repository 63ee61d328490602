"""Shared helpers of the config-file tests: files whose invalid values are marked line by line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from sidecar.config import ConfigError

#: A line of a ``config_invalid.yaml`` whose value is invalid carries this comment.
INVALID_MARK = "# invalid"


def marked_lines(text: str) -> set[int]:
    """Line numbers (1-based) of the lines marked ``# invalid``."""
    return {i + 1 for i, line in enumerate(text.splitlines()) if INVALID_MARK in line}


def key_name(key: str) -> str:
    """The last name of a key path: ``filters[0].drop.rules[2].role`` -> ``role``, ``a.fields[1]`` -> ``fields``."""
    return re.sub(r"(\[\d+\])+$", "", key).rsplit(".", 1)[-1]


def report_invalid_lines(path: Path, load: Callable[[Path, str], object]) -> dict[int, ConfigError]:
    """Every marked line of ``path`` reported by ``load(path, text)``, as ``{line: error}``.

    The loader stops at the first error, so each reported line is blanked and the text loaded again
    until it loads. Each error must read ``FILE:LINE: KEY: problem``, sit on a marked line not reported
    before, and name a key written on that line; in the end every marked line must have been reported.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    marked = marked_lines("\n".join(lines))
    assert marked, f"{path}: no line is marked {INVALID_MARK!r}"
    reported: dict[int, ConfigError] = {}
    for _ in range(len(marked) + 1):
        try:
            load(path, "\n".join(lines) + "\n")
        except ConfigError as err:
            assert err.line in marked and err.line not in reported, f"unmarked or repeated line: {err}"
            assert str(err).startswith(f"{path}:{err.line}: {err.key}: ") and err.problem, str(err)
            assert f"{key_name(err.key)}:" in lines[err.line - 1], f"the key is not on its line: {err}"
            reported[err.line] = err
            lines[err.line - 1] = ""
        else:
            break
    else:
        raise AssertionError(f"{path} still does not load with every marked line blanked")
    assert set(reported) == marked, f"marked lines never reported: {sorted(marked - set(reported))}"
    return reported
