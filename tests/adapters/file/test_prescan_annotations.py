"""``replay --prescan`` leaves out the filters that only annotate when the prescanning filter reads no annotations
(issue 28 item 7): category_buffer's first pass does not classify; dp_replace's (which reads the category) does,
and so does a classify that drops what it cannot classify."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers.kb import kb_file

from filters.category_buffer import CategoryBufferFilter
from filters.classify import ClassifyFilter
from sidecar import prescan
from sidecar.api import Event
from sidecar.config import load_config
from sidecar.drive import replay

CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema: {{format: tsv, header: true}}
filters:
  - classify: {{kb_path: {kb}, rebuild: false, unknown: {unknown}}}
  - category_buffer: {{k: 3, category_field: Cat, avoid_repeat_pairs: 0, max_k_policy: hold}}
"""


def shared_text_log(path: Path, n: int, users: int, texts: int) -> set[tuple[str, str]]:
    """Few texts shared by many users (the worst case for re-created pairs); its (user, query) pairs."""
    rng = random.Random(3)
    rows = [(f"u{rng.randrange(users)}", f"q{rng.randrange(texts)}") for _ in range(n)]
    lines = ["AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tCat"]
    lines += [f"{u}\t{q}\t{i:06d}\t\t\tC{int(q[1:]) % 3}" for i, (u, q) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return set(rows)


@pytest.mark.parametrize(
    ("unknown", "roles_only", "passes"), [("annotate", True, 1), ("drop", True, 2), ("annotate", False, 2)]
)
def test_the_first_pass_classifies_only_when_it_must(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unknown: str, roles_only: bool, passes: int
) -> None:
    """``unknown: annotate`` passes every event on with its roles: category_buffer's first pass skips it
    (classify sees each event once) and still learns every shared pair (no original pair is re-created).
    ``unknown: drop`` can drop events, and a prescanning filter that reads annotations (as dp_replace reads the
    category) needs them: then the first pass classifies too (each event twice)."""
    monkeypatch.setattr(CategoryBufferFilter, "PRESCAN_ROLES_ONLY", roles_only)
    monkeypatch.setattr(prescan, "BACKGROUND", False)  # the first pass in this process, where it is counted
    seen: list[int] = []
    real = ClassifyFilter.process

    def counting(self: ClassifyFilter, batch: list[Event]) -> list[Event]:
        seen.append(len(batch))
        return real(self, batch)

    monkeypatch.setattr(ClassifyFilter, "process", counting)
    src = tmp_path / "in.tsv"
    original = shared_text_log(src, 1200, 25, 12)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CHAIN.format(state=tmp_path / "state", kb=kb_file(), unknown=unknown), encoding="utf-8")
    out = tmp_path / "out.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=2, prescan=True)
    assert sum(seen) == passes * 1200
    if unknown == "annotate":
        lines = out.read_text(encoding="utf-8").splitlines()[1:]
        pairs = [(p[0], p[1]) for p in (line.split("\t") for line in lines)]
        assert pairs and not [p for p in pairs if p in original]
        assert summary.events_out + summary.events_held == 1200
