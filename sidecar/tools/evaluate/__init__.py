"""Evaluators: recall/precision of detectors on labelled corpora (offline)."""
