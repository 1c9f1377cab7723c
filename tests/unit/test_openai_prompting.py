import pytest

from core.domains import Domain, Language
from generation.drafts import MissionDraft
from generation.openai.prompting import PROMPT_VERSION, mission_prompt, sabotage_prompt

CONVENTIONS: dict[Language, str] = {
    "python": "pytest files named `test_*.py`",
    "javascript": "Jest test files named `*.test.js`",
    "sql": "`RETURNS SETOF TEXT`",
    "none": "There are no tests",
}


def domain(language: Language) -> Domain:
    return Domain(name="shop", kind="non_technical", language=language, target=1, retire_after=50)


def test_the_prompt_version_names_a_folder_of_prompts() -> None:
    assert PROMPT_VERSION == "v2"


@pytest.mark.parametrize("language", list(CONVENTIONS))
def test_the_mission_prompt_asks_for_the_language_s_conventions(language: Language) -> None:
    prompt = mission_prompt(domain(language), seed=42)
    assert CONVENTIONS[language] in prompt
    assert "Domain: shop (non-technical). Language: " + language in prompt
    assert "read in ten minutes" in prompt
    assert "Variation: 42." in prompt
    assert "$" not in prompt


def test_the_sabotage_prompt_shows_the_mission_and_forbids_touching_its_tests() -> None:
    mission = MissionDraft(
        title="Totals",
        brief="Add up an order.",
        gold_files={"total.py": "def total(xs):\n    return sum(xs)\n"},
        test_files={"test_total.py": "s = '```'\n"},
    )
    prompt = sabotage_prompt(domain("python"), mission, try_number=3)
    assert "This is try 3." in prompt
    assert "Never touch the tests" in prompt
    assert "every test must fail there" in prompt
    assert "total.py\n```\ndef total(xs):\n    return sum(xs)\n```" in prompt
    assert "test_total.py\n````\ns = '```'\n````" in prompt, "a fence the content cannot close"


def test_the_sabotage_prompt_follows_the_domain_s_proof_policy() -> None:
    lenient = Domain(
        name="shop",
        kind="technical",
        language="python",
        target=1,
        retire_after=100,
        sabotage_must_fail="at_least_one",
    )
    mission = MissionDraft(title="t", brief="b", gold_files={"a.py": ""}, test_files={})
    assert "at least one test must fail there" in sabotage_prompt(lenient, mission, try_number=1)
