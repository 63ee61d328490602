"""deploy/Dockerfile read as instructions (no Docker engine runs here): each stage's lines, ENV, the exec forms."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (upper case) and the rest of its line, continuations joined."""

    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON array of an exec-form instruction (``CMD``/``ENTRYPOINT``/``HEALTHCHECK ... CMD``)."""
        start = self.args.index("[")
        form = json.loads(self.args[start:])
        assert isinstance(form, list) and all(isinstance(x, str) for x in form), self.args
        return form


@dataclass
class Stage:
    """A build stage: its ``FROM`` line's arguments and its instructions."""

    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def one(self, keyword: str) -> Instruction:
        (found,) = self.all(keyword)
        return found

    def env(self) -> dict[str, str]:
        """The stage's ``ENV name=value`` pairs (``$PATH`` and the like left as written)."""
        pairs: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for word in shlex.split(instruction.args):
                name, _, value = word.partition("=")
                pairs[name] = value
        return pairs

    def copies(self) -> dict[str, str]:
        """``COPY SRC DEST`` lines from the build context (not ``--from=`` another stage): DEST -> SRC."""
        found = {}
        for instruction in self.all("COPY"):
            words = instruction.args.split()
            if not any(w.startswith("--from=") for w in words):
                found[words[-1]] = words[-2]
        return found


def stages(path: Path = DOCKERFILE) -> list[Stage]:
    """The Dockerfile's stages in order (comments and blank lines dropped, ``\\`` continuations joined)."""
    text = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")),
    )
    found: list[Stage] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            found.append(Stage(args))
        else:
            found[-1].instructions.append(Instruction(keyword, args))
    return found
