"""The ready configs (``*.yaml`` next to this file), shipped as the package ``querylog_config``.

The files live in the repository's top-level ``config/`` folder; ``pyproject.toml`` maps that
folder to this package (``[tool.setuptools.package-dir]``) so they are package data in the
wheel and in an editable install. Read them with ``querylog config list`` and
``querylog config show NAME`` (``importlib.resources.files("querylog_config")``).
"""
