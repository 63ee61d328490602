"""querylog-sidecar: a privacy filter for web-search query logs."""

__version__ = "0.1.0"
