"""Names of public figures and brands, kept by the ``names: private`` policy.

A searcher's own name, or a neighbour's, is what re-identified AOL users in 2006; a film star's, an author's or a
president's name in a query says what the searcher was interested in, not who they are. ``names: private`` keeps
a detected person name when it is one of:

* the curated terms of the classifier's taxonomy (``knowledge/data/categories.yaml``: people in the news,
  artists, athletes, stores and brands), the one curated list both components read;
* WordNet 3.0's multi-word instances of people (``Virginia Woolf``, ``Tom Hanks``: authors, artists, statesmen,
  historic persons), extracted once into ``data/public_people.tsv`` (``python -m filters.hipaa_scrub.public``
  rewrites it, deterministically; opening WordNet takes half a minute, the file a few milliseconds). A WordNet
  name that more than ``MAX_BEARERS`` people in the US share (1990 census first-name share x surname share x
  300 million: ``john smith`` about 99,000, ``john brown`` 61,000) is left out: in a query it is likelier a
  private person than the explorer or the abolitionist. The curated list has no such cap (its curators chose
  ``michael jackson``).

Brands and fictional characters built on a first and last name (``john deere``, ``harry potter``) are never person
names, whatever the policy (``detectors.people.ALLOWED_PHRASES``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from filters.hipaa_scrub.detectors.people import phrases
from knowledge.categories import load_taxonomy
from knowledge.text import key_of

PEOPLE_FILE = Path(__file__).with_name("data") / "public_people.tsv"
PUBLIC_PEOPLE: frozenset[str] = phrases(
    """julius caesar|dolly parton|martin luther|abraham lincoln|george washington|thomas jefferson|jack lalanne|
    alice cooper|mark twain|billy graham|dave matthews|kelly clarkson|
    paris hilton|will smith|george bush|bill clinton|hillary clinton|john kerry|tiger woods|michael jordan|
    britney spears|jennifer lopez|jessica simpson|carrie underwood|tom cruise|brad pitt|angelina jolie|
    johnny depp|oprah winfrey|elvis presley|marilyn monroe|kenny chesney|tim mcgraw|faith hill|
    dick clark|jay leno|david letterman|howard stern|rush limbaugh|
    jesse james|billy joel|elton john|stevie wonder|bob marley|ray charles|james brown|john lennon|
    dr phil|judge judy|kevin federline|
    christina aguilera|jessica alba|lindsay lohan|nicole richie|chris brown|mary j blige|kanye west"""
)
"""Public figures kept by ``names: private`` besides the shared curated list and WordNet (once ``allow``ed by
the name detector whatever the policy; their own list now, so that ``names: all`` scrubs them)."""

MAX_BEARERS = 10_000
"""A WordNet person's name shared by more people than this (census estimate) is not kept as public."""
US_PEOPLE = 300e6
_PLAIN = re.compile(r"^[a-z][a-z' .-]*$")


def _is_plain_name(lemma: str) -> bool:
    """Two to four words of letters (with ``'``, ``.`` or ``-``): a name a query could hold."""
    return _PLAIN.match(lemma) is not None and 2 <= len(lemma.split()) <= 4


@lru_cache(maxsize=1)
def public_names() -> frozenset[str]:
    """Keys (:func:`knowledge.text.key_of`) of public figures' and brands' names."""
    keys = {key_of(line) for line in PEOPLE_FILE.read_text(encoding="utf-8").splitlines() if line.strip()}
    keys.update(key_of(p) for p in PUBLIC_PEOPLE)
    for category in load_taxonomy().categories:
        for _, terms in category.terms:
            keys.update(key_of(t) for t in terms)
    keys.discard("")
    return frozenset(keys)


def extract_wordnet_people() -> list[str]:
    """The multi-word lemmas of WordNet's person instances (lexicographer file ``noun.person``), sorted."""
    from filters.hipaa_scrub.names import load_names
    from knowledge.wordnet import locate, open_wordnet

    census = load_names()

    def bearers(name: str) -> float:
        words = name.replace(".", " ").split()
        return census.first_share.get(words[0], 0.0) * census.last_share.get(words[-1], 0.0) * US_PEOPLE

    out: set[str] = set()
    with open_wordnet(locate()) as wn:
        for synset in wn.all_synsets("n"):
            if synset.lexname() == "noun.person" and synset.instance_hypernyms():
                for lemma in synset.lemma_names():
                    name = lemma.replace("_", " ").lower()
                    if _is_plain_name(name) and bearers(name) <= MAX_BEARERS:
                        out.add(name)
    return sorted(out)


if __name__ == "__main__":  # pragma: no cover - the rebuild entry point
    people = extract_wordnet_people()
    PEOPLE_FILE.write_text("".join(p + "\n" for p in people), encoding="utf-8")
    print(f"{len(people)} names written to {PEOPLE_FILE}")
