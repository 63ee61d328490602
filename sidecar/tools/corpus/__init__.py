"""Labelled test corpora generated for measuring detectors (offline)."""
