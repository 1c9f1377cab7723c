"""The prompts, rendered from the versioned files in prompts/<PROMPT_VERSION>/.

A changed prompt is a new version folder, never an edit of a released one, so a mission's
stored prompt version always names the words that produced it.
"""

from __future__ import annotations

import re
from importlib import resources
from string import Template

from core.domains import Domain
from generation.drafts import Files, MissionDraft

PROMPT_VERSION = "v2"

_MUST_FAIL = {"all": "every test", "at_least_one": "at least one test"}
_BACKTICKS = re.compile(r"`+")


def mission_prompt(domain: Domain, *, seed: int) -> str:
    return _render("mission.md", domain, seed=str(seed))


def sabotage_prompt(domain: Domain, mission: MissionDraft, *, try_number: int) -> str:
    return _render(
        "sabotage.md",
        domain,
        try_number=str(try_number),
        must_fail=_MUST_FAIL[domain.sabotage_must_fail],
        title=mission.title,
        brief=mission.brief,
        gold_files=_listing(mission.gold_files),
        test_files=_listing(mission.test_files) or "(none)",
    )


def _render(name: str, domain: Domain, **values: str) -> str:
    return Template(_read(name)).substitute(
        domain=domain.name,
        kind=domain.kind.replace("_", "-"),
        language=domain.language,
        conventions=_read(f"{domain.language}.md").strip(),
        **values,
    )


def _read(name: str) -> str:
    folder = resources.files("generation.openai") / "prompts" / PROMPT_VERSION
    return (folder / name).read_text(encoding="utf-8")


def _listing(files: Files) -> str:
    return "\n\n".join(_file_block(path, files[path]) for path in sorted(files))


def _file_block(path: str, content: str) -> str:
    # A fence longer than any run of backticks inside, so the content cannot close it early.
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    fence = "`" * max(3, longest + 1)
    ending = "" if content.endswith("\n") else "\n"
    return f"{path}\n{fence}\n{content}{ending}{fence}"
