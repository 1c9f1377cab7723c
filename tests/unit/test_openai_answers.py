import json
from typing import Any

import pytest

from generation.drafts import MissionDraft, SabotageDraft
from generation.openai.answers import AnswerFormat, UnusableAnswer, strict_schema


def objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema in `node`, nested ones included."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += objects(value)
    elif isinstance(node, list):
        for value in node:
            found += objects(value)
    return found


@pytest.mark.parametrize("draft", [MissionDraft, SabotageDraft])
def test_the_schema_is_in_the_subset_openai_strict_mode_accepts(draft: type) -> None:
    schema = AnswerFormat("x", draft).schema
    assert schema["type"] == "object"
    text = json.dumps(schema)
    for keyword in ("$ref", "$defs", "minLength", "maxLength"):
        assert keyword not in text
    for node in objects(schema):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def test_files_travel_as_a_list_of_path_and_content() -> None:
    gold = AnswerFormat("mission", MissionDraft).schema["properties"]["gold_files"]
    assert gold["type"] == "array"
    assert gold["items"]["properties"] == {
        "path": {"type": "string"},
        "content": {"type": "string"},
    }


def test_a_free_form_mapping_elsewhere_is_refused_rather_than_sent() -> None:
    with pytest.raises(ValueError, match="cannot express a free-form object"):
        strict_schema(dict[str, int])


GOLD = [{"path": "count.py", "content": "x = 1\n"}]
MISSION = {
    "title": "Counting words",
    "brief": "Count them.",
    "gold_files": GOLD,
    "test_files": [{"path": "test_count.py", "content": "def test(): pass\n"}],
    "hidden_test_files": [{"path": "test_more.py", "content": "def test(): pass\n"}],
}


def test_an_answer_decodes_into_the_draft_with_files_as_a_mapping() -> None:
    draft = AnswerFormat("mission", MissionDraft).decode(json.dumps(MISSION))
    assert draft == MissionDraft(
        title="Counting words",
        brief="Count them.",
        gold_files={"count.py": "x = 1\n"},
        test_files={"test_count.py": "def test(): pass\n"},
        hidden_test_files={"test_more.py": "def test(): pass\n"},
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "the mission answer is not valid JSON"),
        (json.dumps({**MISSION, "title": ""}), r"does not match its schema: .* at `\$.title`"),
        (
            json.dumps({**MISSION, "extra": 1}),
            "does not match its schema: Object contains unknown field",
        ),
        (
            json.dumps({**MISSION, "gold_files": GOLD * 2}),
            "the mission answer's gold_files lists 'count.py' twice",
        ),
    ],
)
def test_an_answer_the_draft_cannot_hold_is_malformed(content: str, message: str) -> None:
    with pytest.raises(UnusableAnswer, match=message) as raised:
        AnswerFormat("mission", MissionDraft).decode(content)
    assert raised.value.outcome == "malformed"
