"""``classify``: annotate each event with its query's category (paper 001, Algorithm 1).

Annotations for the filters after it (never written to the output record):
``category`` (one of the categories of the category taxonomy (``knowledge/data/categories.yaml``), or None),
``category_path`` (levels L1..L5), ``main_unit`` (the most specific semantic
unit) and ``category_confidence`` (0..1). Queries that cannot be categorised
follow ``unknown``: ``annotate`` keeps them with ``category`` None (what
``category_buffer`` puts in its own unknown bucket), ``drop`` drops them,
``dead_letter`` moves them to the dead-letter file. All three are counted.

An empty query (``""`` or only spaces; e.g. one ``hipaa_scrub`` emptied with
``emptied: keep``) has no semantic unit, so no category: it is never looked up
and follows ``unknown`` like any uncategorisable query (also counted as
``empty_query``).

**The clicked URL's host** (``use_url``, on by default): when the schema maps a
``url`` role (AOL: ``ClickURL``) and an event's query alone is uncategorisable,
the host of its clicked URL is classified instead (``www.bankofamerica.com`` ->
``bank of america`` -> Business), counted as ``classified_by_url``. The query
decides whenever it can; an empty query stays unclassified whatever its URL.

Results are memoised per query text and per normalised text (an LRU of
``cache_size`` entries in the classifier, see :class:`knowledge.classifier.Classifier`),
so a replay's first pass (``--prescan``) and its real pass classify each distinct
query once, and so do repeated queries in a stream.

``output_field`` (off by default) also writes the category into the record: a
JSON key (added or replaced) or an existing TSV column (the output keeps the
input's columns, so a TSV log needs that column already); uncategorised queries
get an empty string (TSV) or null (JSON). Other codecs are counted, not changed.

The knowledge base is loaded once when the filter is built (``kb_path``, default
:func:`knowledge.default_kb_path`); when it is missing, corrupt or stale it is
rebuilt then (``rebuild: true``) or the config is rejected with the reason —
never mid-stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sidecar.api import BuildContext, ConfigValueError, Event, FieldError, Filter, FilterConfig, option


@dataclass(frozen=True)
class ClassifyConfig(FilterConfig):
    """Options of ``classify``."""

    kb_path: str | None = option(
        None, "Compiled KB file (relative to the config file); default $QUERYLOG_KB or ~/.cache/querylog/kb.qlkb."
    )
    rebuild: bool = option(True, "Build the KB at startup when it is missing, corrupt or stale (takes ~30 s).")
    unknown: Literal["annotate", "drop", "dead_letter"] = option(
        "annotate", "Uncategorisable queries: keep with category None, drop, or send to the dead-letter file."
    )
    cache_size: int = option(
        200_000, "Distinct queries whose classification is kept in memory (least recently used out; 0: none).", min=0
    )
    use_url: bool = option(
        True,
        "When the query alone is uncategorisable, classify the host of the clicked URL (the schema's url role).",
    )
    output_field: str | None = option(
        None, "Also write the category into this record field (JSON key, or an existing TSV column); off: null."
    )


class ClassifyFilter(Filter[ClassifyConfig]):
    """Annotate events with category, path, main unit and confidence of the query."""

    NAME = "classify"
    Config = ClassifyConfig
    SUMMARY = "query category (16 ODP categories over WordNet), path, main unit, confidence"

    def __init__(self, config: ClassifyConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        from knowledge import KBUnavailable
        from knowledge.classifier import Classifier

        path = None
        if config.kb_path:
            path = Path(config.kb_path)
            if not path.is_absolute():
                path = ctx.config_dir / path
        self.classifier: Classifier | None = None  # stays None only when built to check a config
        if ctx.validate_only:  # check the KB is there (or may be built at start), build and load nothing
            from knowledge import default_kb_path, kb_status

            kb, reason = kb_status(path or default_kb_path())
            if kb is None and not config.rebuild:
                raise ConfigValueError("kb_path", f"knowledge base {path or default_kb_path()} is {reason}")
            return
        try:
            self.classifier = Classifier.load(path, build_if_needed=config.rebuild)
        except KBUnavailable as exc:
            raise ConfigValueError("kb_path", str(exc)) from None
        self.classifier.cache_size = config.cache_size

    def _unknown(self, ev: Event) -> bool:
        """Handle an uncategorised event; True when it stays in the stream."""
        policy = self.config.unknown
        if policy == "annotate":
            self.counts["unclassified"] += 1
            return True
        if policy == "drop":
            self.counts["dropped_unclassified"] += 1
            return False
        self.counts["dead_lettered_unclassified"] += 1
        dead = self.ctx.dead_letters
        if dead is not None:
            dead.add("unclassified", "classify", None, ev.raw if ev.raw is not None else _record_text(ev))
        return False

    def annotates_only(self) -> bool:
        """``unknown: annotate`` drops nothing and no role changes: a buffer's first pass skips classifying."""
        return self.config.unknown == "annotate"

    def process(self, batch: list[Event]) -> list[Event]:
        assert self.classifier is not None, "built with validate_only: never run"
        classify = self.classifier.lookup
        use_url = self.config.use_url
        keep: list[Event] = []
        for ev in batch:
            q = ev.query
            if isinstance(q, str) and q and not q.isspace():
                result = classify(q)
                if result is None and use_url and isinstance(ev.url, str) and ev.url:
                    host = url_host(ev.url)
                    if host:
                        result = classify(host)
                        if result is not None:
                            self.counts["classified_by_url"] += 1
            else:
                result = None
                if q is None or isinstance(q, str):
                    self.counts["empty_query"] += 1
            if result is None:
                ev.annotate("category", None)
                ev.annotate("category_path", ())
                ev.annotate("main_unit", None)
                ev.annotate("category_confidence", 0.0)
                if self._unknown(ev):
                    keep.append(ev)
                continue
            ev.annotate("category", result.category)
            ev.annotate("category_path", result.path)
            ev.annotate("main_unit", result.main_unit)
            ev.annotate("category_confidence", result.confidence)
            self.counts["classified"] += 1
            keep.append(ev)
        if self.config.output_field is not None:
            for ev in keep:
                self._write_field(ev, self.config.output_field, ev.meta["category"] if ev.meta else None)
        return keep

    def _write_field(self, ev: Event, name: str, value: str | None) -> None:
        """Put ``value`` into the record's field ``name`` through the event's codec (which keeps ``raw`` in step)."""
        codec = ev.codec
        if codec is None:
            self.counts["output_field_unsupported_codec"] += 1
            return
        try:
            codec.set_field(ev, name, value)
        except FieldError as exc:
            reason = {"no_such_field": "no_column", "field_is_role": "is_role"}.get(exc.reason, exc.reason)
            self.counts[f"output_field_{reason}"] += 1
            return
        self.counts["output_field_written"] += 1

    def stats(self) -> dict[str, Any]:
        return {"kb_sha256": self.classifier.kb.sha256[:16]} if self.classifier is not None else {}


def url_host(url: str) -> str:
    """The host of a clicked URL (``http://www.ebay.com/x`` -> ``www.ebay.com``; AOL's ``www.ebay.com`` too)."""
    rest = url.strip()
    scheme, sep, after = rest.partition("://")
    if sep and scheme.isalpha():
        rest = after
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = host.rpartition("@")[2]  # no user info
    if host.startswith("["):  # an IPv6 literal names no site
        return ""
    host = host.partition(":")[0]
    return "" if host.replace(".", "").isdigit() else host


def _record_text(ev: Event) -> str | None:
    codec = ev.codec
    try:
        return codec.encode(ev) if codec is not None else None
    except Exception:  # a record the codec cannot write still gets dead-lettered, without its text
        return None
