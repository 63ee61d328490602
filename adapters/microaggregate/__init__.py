"""Batch microaggregation of whole logs (issue 14): ``querylog microaggregate``, user-level k-anonymity by MDAV
over paper 003's user distance, every user keeping their id but getting their cluster's aggregated queries."""
