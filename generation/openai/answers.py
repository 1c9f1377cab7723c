"""Structured answers: the strict JSON schema a model answers in, and reading its answer back.

The schema is derived from a draft type of generation/drafts.py, the one source of truth. Two
changes make it acceptable to OpenAI's strict mode: a `Files` mapping, which strict mode cannot
express, travels as a list of {path, content} objects; and length limits, which strict mode
does not accept, are left out of the schema and enforced when the answer is decoded.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import msgspec
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseFormatTextJSONSchemaConfigParam
from openai.types.shared_params import ResponseFormatJSONSchema

from generation.drafts import Files

Draft = TypeVar("Draft", bound=msgspec.Struct)

_ENFORCED_ON_DECODE = frozenset({"minLength", "maxLength"})


class UnusableAnswer(Exception):
    """The model answered, and was billed, but the answer cannot be used."""

    def __init__(self, outcome: Literal["refused", "malformed"], message: str) -> None:
        super().__init__(message)
        self.outcome: Literal["refused", "malformed"] = outcome


class FileEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: str
    content: str


class AnswerFormat(Generic[Draft]):
    """How a model is asked for a `draft` type, and how its answer becomes one."""

    def __init__(self, name: str, draft: type[Draft]) -> None:
        self.name = name
        self._draft = draft
        fields = msgspec.structs.fields(draft)
        self._file_fields = [field.name for field in fields if field.type == Files]
        self._wire = msgspec.defstruct(
            f"{draft.__name__}Answer",
            [
                (field.name, list[FileEntry] if field.name in self._file_fields else field.type)
                for field in fields
            ],
            kw_only=True,
            frozen=True,
            forbid_unknown_fields=True,
        )
        self.schema = strict_schema(self._wire)

    def response_format(self) -> ResponseFormatJSONSchema:
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "strict": True, "schema": self.schema},
        }

    def text_format(self) -> ResponseFormatTextJSONSchemaConfigParam:
        """The same structured output, as the Responses API asks for it."""
        return {"type": "json_schema", "name": self.name, "strict": True, "schema": self.schema}

    def read(self, completion: ChatCompletion) -> Draft:
        return self.decode(_content(completion))

    def read_response(self, response: Response) -> Draft:
        return self.decode(_response_content(response))

    def decode(self, content: str) -> Draft:
        try:
            answer = msgspec.json.decode(content, type=self._wire)
        except msgspec.ValidationError as error:
            raise UnusableAnswer(
                "malformed", f"the {self.name} answer does not match its schema: {error}"
            ) from None
        except msgspec.DecodeError as error:
            raise UnusableAnswer(
                "malformed", f"the {self.name} answer is not valid JSON: {error}"
            ) from None
        values = msgspec.structs.asdict(answer)
        for field in self._file_fields:
            values[field] = _files(values[field], f"{self.name} answer's {field}")
        return self._draft(**values)


def strict_schema(kind: Any) -> dict[str, Any]:
    """The JSON schema of `kind` in the subset that OpenAI's strict mode accepts."""
    schema = msgspec.json.schema(kind)
    return _strict(schema, schema.get("$defs", {}))


def _strict(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        # Inlined: strict mode wants an object at the root, not a reference.
        return _strict(definitions[node["$ref"].rpartition("/")[2]], definitions)
    strict = {key: value for key, value in node.items() if key not in _ENFORCED_ON_DECODE}
    strict.pop("$defs", None)
    if "properties" in node:
        strict["properties"] = {
            name: _strict(value, definitions) for name, value in node["properties"].items()
        }
        strict["required"] = list(node["properties"])
        strict["additionalProperties"] = False
    elif node.get("type") == "object":
        raise ValueError(f"strict structured outputs cannot express a free-form object: {node}")
    if "items" in node:
        strict["items"] = _strict(node["items"], definitions)
    if "anyOf" in node:
        strict["anyOf"] = [_strict(option, definitions) for option in node["anyOf"]]
    return strict


def _files(entries: list[FileEntry], where: str) -> Files:
    files: Files = {}
    for entry in entries:
        if entry.path in files:
            raise UnusableAnswer("malformed", f"the {where} lists {entry.path!r} twice")
        files[entry.path] = entry.content
    return files


def _content(completion: ChatCompletion) -> str:
    if not completion.choices:
        raise UnusableAnswer("malformed", "the model answered with no choices")
    choice = completion.choices[0]
    if choice.message.refusal:
        raise UnusableAnswer("refused", f"the model refused: {choice.message.refusal}")
    if choice.finish_reason == "content_filter":
        raise UnusableAnswer("refused", "the model's content filter withheld the answer")
    if choice.finish_reason == "length":
        tokens = completion.usage.completion_tokens if completion.usage else "?"
        raise UnusableAnswer(
            "malformed",
            f"the answer was cut off at the model's output limit ({tokens} tokens) "
            "and is incomplete",
        )
    if not choice.message.content:
        raise UnusableAnswer("malformed", "the model's answer is empty")
    return choice.message.content


def _response_content(response: Response) -> str:
    """The text of a response that has ended (completed or incomplete)."""
    for item in response.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "refusal":
                    raise UnusableAnswer("refused", f"the model refused: {part.refusal}")
    details = response.incomplete_details
    if response.status == "incomplete":
        if details is not None and details.reason == "content_filter":
            raise UnusableAnswer("refused", "the model's content filter withheld the answer")
        tokens = response.usage.output_tokens if response.usage else "?"
        raise UnusableAnswer(
            "malformed",
            f"the answer was cut off at the model's output limit ({tokens} tokens) "
            "and is incomplete",
        )
    if not response.output_text:
        raise UnusableAnswer("malformed", "the model's answer is empty")
    return response.output_text
