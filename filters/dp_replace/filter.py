"""``dp_replace``'s :class:`~sidecar.api.Filter`: map, charge the budget, draw, rewrite, count.

The mechanism and every privacy-relevant choice are described in the package
docstring (:mod:`filters.dp_replace`) and in ``filters/dp_replace/README.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import structlog

from filters.dp_replace.budget import Account, Ledger, float_below, spending
from filters.dp_replace.config import DpReplaceConfig
from filters.dp_replace.domains import Domains, UnknownSynset
from filters.dp_replace.mapping import EMPTY, Mapped, Mapper
from filters.dp_replace.mechanism import overrun
from filters.dp_replace.rand import RandomPool
from filters.dp_replace.sampler import Sampler
from filters.dp_replace.surface import Inflector, Labeler, render
from sidecar.api import BuildContext, ConfigValueError, Event, FieldError, Filter

log = structlog.get_logger("querylog.dp_replace")

REPLACED, SUPPRESSED, DROPPED, UNPROTECTED = range(4)


class DpReplaceFilter(Filter[DpReplaceConfig]):
    """Replace each query by concepts drawn with the exponential mechanism (paper 004), per-user budget."""

    NAME = "dp_replace"
    Config = DpReplaceConfig
    SUMMARY = "epsilon-DP query replacement: exponential mechanism over WordNet domains, per-user budget (paper 004)"
    STATEFUL = True
    PRESCAN = True

    def __init__(self, config: DpReplaceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        from knowledge import KBUnavailable, default_kb_path, kb_status, load_kb
        from knowledge.concepts import concept_tree

        path = ctx.resolve(config.kb_path) if config.kb_path else None
        self.ledger: Ledger | None = None
        self._ready = False
        if ctx.validate_only:  # check the KB is there (or may be built at start); build and write nothing
            kb, reason = kb_status(path or default_kb_path())
            if kb is None and not config.rebuild:
                raise ConfigValueError("kb_path", f"knowledge base {path or default_kb_path()} is {reason}")
            if kb is not None:
                self._domains(concept_tree(kb))
            return
        if ctx.state is None:
            raise ConfigValueError("budget", "dp_replace needs the state store (state_dir) for its budget ledger")
        try:
            kb = load_kb(path, build_if_needed=config.rebuild)
        except KBUnavailable as exc:
            raise ConfigValueError("kb_path", str(exc)) from None
        tree = concept_tree(kb)
        self.tree = tree
        self.domains = self._domains(tree)
        self.pool = RandomPool(ctx.token_bytes)
        self.sampler = Sampler(self.domains, config.criterion, self.pool, config.cache_size)
        self.mapper = Mapper(kb, tree, self.domains, config.cache_size, config.single_concept == "drop")
        self.inflector = Inflector(kb.noun_exc)
        self.labeler = Labeler(tree, kb)
        self.categories = kb.categories
        self._category_of: list[int] = tree.category.tolist()
        self.epsilon = Fraction(config.epsilon)
        try:
            self.ledger = Ledger(ctx.state, ctx.token_bytes)
        except ValueError as exc:
            raise ConfigValueError("budget", str(exc)) from None
        self.ledger.write_meta(
            {
                "epsilon": repr(config.epsilon),
                "budget": config.budget,
                "max_queries": str(config.max_queries),
                "window_seconds": repr(config.window_seconds),
                "criterion": config.criterion,
                "domain": config.domain,
                "surface": config.surface,
            }
        )
        self.prescanned: Counter[str] | None = None
        self._stream_cost = self.epsilon / config.max_queries
        self._batch_costs: dict[str, Fraction] = {}
        self._eps_float: dict[Fraction, float] = {}
        self._window = -1
        self._warned_prescan = False
        self._ready = True
        singles = self.domains.single_concept_domains()
        if singles:
            log.warning("single_concept_domains", filter=self.NAME, count=singles, policy=config.single_concept)

    def _domains(self, tree: Any) -> Domains:
        cfg = self.config
        try:
            return Domains(tree, cfg.domain, cfg.root, cfg.topics, cfg.topics or None)
        except UnknownSynset as exc:
            raise ConfigValueError(exc.key, str(exc)) from None

    # --- budget --------------------------------------------------------------------------

    def _window_now(self) -> int:
        cfg = self.config
        if cfg.budget == "batch" or cfg.window_seconds is None:
            return 0
        return int(self.ctx.clock() // cfg.window_seconds)

    def _cost(self, user: str) -> Fraction | None:
        """Epsilon per concept for ``user`` (None: unknown in batch mode, fail closed). One object per price."""
        if self.config.budget == "stream":
            return self._stream_cost
        if self.prescanned is None:
            return None
        cost = self._batch_costs.get(user)
        if cost is None:
            m = self.prescanned.get(user, 0)
            if not m:
                return None
            if len(self._batch_costs) >= 200_000:
                self._batch_costs.clear()
            cost = self._batch_costs[user] = self.epsilon / m
        return cost

    def prescan(self, batches: Iterable[list[Event]]) -> None:
        """``budget: batch``: count each user's concepts (m) over the whole archive, as ``process`` will map them."""
        if not self._ready:
            return
        counts: Counter[str] = Counter()
        read = 0
        for batch in batches:
            for ev in batch:
                read += 1
                mapped = self._map(ev)
                if mapped.parts:
                    counts[str(ev.user)] += len(mapped.parts)
        self.prescanned = counts
        self.counts["prescanned"] += read
        self.counts["prescan_users"] = len(counts)

    # --- events ----------------------------------------------------------------------------

    def _map(self, ev: Event) -> Mapped:
        q = ev.query
        meta = ev.meta
        category = meta.get("category") if meta else None
        return self.mapper.map(q if isinstance(q, str) else "", category if isinstance(category, str) else None)

    def _clear_dependent(self, ev: Event) -> None:
        for role in self.config.dependent_roles:
            value = getattr(ev, role)
            if value is not None and value != "":
                setattr(ev, role, "" if isinstance(value, str) else None)
        if self.config.dependent_fields:
            codec = ev.codec
            for name in self.config.dependent_fields:
                if codec is None:
                    self.counts["dependent_field_unsupported_codec"] += 1
                    continue
                try:
                    codec.set_field(ev, name, "")
                except FieldError as exc:
                    self.counts[f"dependent_field_{exc.reason}"] += 1

    def _empty(self, ev: Event) -> None:
        ev.query = ""
        self._clear_dependent(ev)
        ev.annotate("category", None)
        ev.annotate("category_path", ())
        ev.annotate("main_unit", None)
        ev.annotate("category_confidence", 0.0)

    def _suppress(self, ev: Event, acc: Account, out: list[Event]) -> None:
        acc.count(SUPPRESSED)
        if self.config.budget_spent == "empty":
            self._empty(ev)
            out.append(ev)

    def process(self, batch: list[Event]) -> list[Event]:
        if not self._ready or self.ledger is None:
            raise RuntimeError("dp_replace was built to check a config only")
        cfg = self.config
        ledger = self.ledger
        window = self._window_now()
        if window != self._window:
            ledger.forget_other_windows(window)
            self._window = window
        users = [str(ev.user) for ev in batch]
        key = ledger.key
        keys = [key(u) for u in users]
        accounts = ledger.accounts(keys, window)
        out: list[Event] = []
        draw, label, surface, inflector = self.sampler.draw_node, self.labeler.label, cfg.surface, self.inflector
        category_of, names = self._category_of, self.categories
        mapper_map = self.mapper.map
        clear = self._clear_dependent
        tally: Counter[str] = Counter()
        replaced = concepts = released = 0
        for ev, user, k in zip(batch, users, keys):
            acc = accounts[k]
            q = ev.query
            meta = ev.meta
            category = meta.get("category") if meta else None
            if isinstance(q, str) and q and not q.isspace():
                mapped = mapper_map(q, category if isinstance(category, str) else None)
            else:
                tally["empty_query"] += 1
                mapped = EMPTY
            if mapped.single:
                tally["single_concept_dropped"] += mapped.single
            parts = mapped.parts
            if not parts:
                self._no_concept(ev, acc, out, tally)
                continue
            cost = self._cost(user)
            if cost is None:  # batch mode without a first pass over this user's events: fail closed
                self._no_prescan(ev, acc, out, tally)
                continue
            if acc.cost is not cost:
                self._price(acc, cost)
            n = len(parts)
            if not acc.can_spend(n):
                tally["suppressed_budget"] += 1
                self._suppress(ev, acc, out)
                continue
            eps_q = acc.eps_q
            nodes = []
            for part in parts:
                x = draw(part.node, eps_q)
                if x < 0:
                    released += 1
                    x = part.node
                nodes.append(x)
            acc.spend(n)
            acc.count(REPLACED)
            words = [label(x) for x in nodes]
            ev.query = render(mapped, words, surface, inflector)
            clear(ev)
            cat = category_of[nodes[0]]
            name = names[cat] if cat >= 0 else None
            ev.meta = {
                **(meta or {}),
                "category": name,
                "category_path": (name,) if name else (),
                "main_unit": words[0][0],
                "category_confidence": 0.0,
            }
            replaced += 1
            concepts += n
            out.append(ev)
        ledger.commit(window)
        if released:
            tally["single_concept_released"] += released
        if replaced:
            tally["replaced"] += replaced
            tally["replaced_concepts"] += concepts
        self.counts.update(tally)
        return out

    def _no_prescan(self, ev: Event, acc: Account, out: list[Event], tally: Counter[str]) -> None:
        """A user whose budget share is unknown (batch mode without a first pass): suppressed, logged once."""
        tally["suppressed_no_prescan"] += 1
        if self.prescanned is None and not self._warned_prescan:
            log.error("budget_unknown", filter=self.NAME, reason="batch_budget_needs_prescan")
            self._warned_prescan = True
        self._suppress(ev, acc, out)

    def _price(self, acc: Account, cost: Fraction) -> None:
        """Charge ``acc`` at ``cost`` per concept from now on, drawing with the largest float below it (cached)."""
        eps_float = self._eps_float
        eps_q = eps_float.get(cost)
        if eps_q is None:
            if len(eps_float) >= 200_000:
                eps_float.clear()
            eps_q = eps_float[cost] = float_below(cost)
        acc.price(cost, self.epsilon, eps_q)

    def _no_concept(self, ev: Event, acc: Account, out: list[Event], tally: Counter[str]) -> None:
        tally["no_concept"] += 1
        policy = self.config.no_concept
        if policy == "drop":
            tally["dropped_no_concept"] += 1
            acc.count(DROPPED)
            return
        if policy == "empty":
            tally["emptied_no_concept"] += 1
            acc.count(DROPPED)
            self._empty(ev)
        else:
            tally["kept_unprotected"] += 1
            acc.count(UNPROTECTED)
        out.append(ev)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
        self._ready = False

    def stats(self) -> dict[str, Any]:
        if not self._ready:
            return {}
        cfg = self.config
        stream = cfg.budget == "stream"
        per = cfg.epsilon / cfg.max_queries if stream else cfg.epsilon
        return {
            "epsilon": cfg.epsilon,
            "budget": cfg.budget,
            "criterion": cfg.criterion,
            "domain": cfg.domain,
            "domains": len(self.domains.names),
            "float_overrun_per_query_max": overrun(min(per, 50.0)),
            "ledger": spending(self.ledger, self._window_now(), self.epsilon, self._stream_cost if stream else None)
            if self.ledger is not None
            else {},
        }
