"""Query classifier: paper 001 Algorithm 1 over the compiled KB, with paper 004 §3.4 mapping.

Per query:

1. **Tokens** — case-folded words (``www.ebay.com`` -> ``www ebay com``). A rare
   token that no lemma uses gets a **spelling recommendation** (the most frequent
   known word one edit away: ``artic`` -> ``arctic``) or, for glued words, a
   **segmentation** (``bankofamerica`` -> ``bank of america``). Real words get
   none: tokens under five letters, WordNet words of any part of speech and their
   inflections, and census names.
2. **Semantic units** — right to left: the longest span ending at the current
   token that is a KB lemma (WordNet noun, multiword included, plurals
   normalised; a curated term), found by **progressive left-trimming**; adjectives
   just before it join the unit (``european soccer``). Stop words never start or
   end a unit, except in a curated term (``t mobile``, ``realtor com``).
   Units that name a city or a person (HIPAA identifiers, which paper 001
   removes) are the main unit only when nothing else is left; in the voting of
   :meth:`Classifier.classify` named states, countries and regions are outvoted
   by topic words too (``texas lottery`` is about the lottery).
3. **Main unit** — the most specific unit: lowest wordfreq frequency (the
   paper's "entropy"; ``european soccer`` 10^4.38 beats ``players`` 10^5.30).
4. **Category** — :meth:`Classifier.classify_paper` takes the main unit's category
   alone (Algorithm 1 as published). :meth:`Classifier.classify` lets every unit
   vote with weight growing with its specificity, the main unit counting most, so
   context can overrule one ambiguous word; the main unit reported is then the
   most specific unit of the winning category. Two kinds of unit do not vote
   there: a unit whose senses reach a category with under ``MIN_SHARE`` of their
   weight (``MIN_SHARE_COMMON`` for everyday words such as ``home`` or ``life``:
   its main senses have no category, so it is no evidence), and the words of a
   person's name (a census first name then a census surname, far likelier as a
   name than as words: ``katy perry``), an identifier rather than a topic; a query
   left with no voting unit is uncategorisable.

5. **Before giving up** (:mod:`~knowledge.classifier.fallback`, an improvement on the
   paper, on by default; ``Classifier.fallback = False`` gives the paper's coverage): a
   person's name alone goes to Arts/people; rare tokens are repaired (letters/digits
   split, one edit to a curated term, two edits from six letters, glued words with
   plural pieces) and the units voted again; ``edu``/``gov``/``mil`` domains; a US
   broadcast call sign; a newspaper's name; a name then a non-English country's
   top-level domain (World); last, a noun only its WordNet lexicographer file's default
   category reaches (``lexname_defaults``: artifacts are Home), never a voting unit.

Queries made mostly of words common in other languages and rare in English go to
the ``foreign`` category (ODP's World); a lone such word must be far commoner there
than in English (``trabajo``, not the brand-like ``sentra``). A query with no unit is uncategorisable:
:meth:`Classifier.classify` returns None.

Modules, in the order of the steps: :mod:`~knowledge.classifier.spelling`
(recommendations), :mod:`~knowledge.classifier.units` (semantic units),
:mod:`~knowledge.classifier.foreign` (other languages and scripts),
:mod:`~knowledge.classifier.names` (person names),
:mod:`~knowledge.classifier.vote` (main unit and category),
:mod:`~knowledge.classifier.fallback` (before giving up; its last step in
:mod:`~knowledge.classifier.defaults`),
:mod:`~knowledge.classifier.classifier` (the :class:`Classifier` and its caches);
value types in :mod:`~knowledge.classifier.model`.
"""

from knowledge.classifier.classifier import CACHE_SIZE, Classifier
from knowledge.classifier.model import Classification, Entry, Sense, Tokens, Unit, Verdict

__all__ = ["CACHE_SIZE", "Classification", "Classifier", "Entry", "Sense", "Tokens", "Unit", "Verdict"]
