"""What the published OpenAPI document declares beyond the Python types, so that a request the
document allows is one the server accepts and one it refuses is one the document rules out.

The routes check text themselves, to answer with the status API.md names and a message that says
what to change; an annotation says the same rule to the document:
`Annotated[str, Text(max_length=200)]`, `Annotated[str, OneOf(TRACKS)]` for a name of the domain
map the app was made with, `Text(...).header(...)` for a header. Bodies that refuse unknown
fields (msgspec's forbid_unknown_fields) are declared with `additionalProperties: false`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import msgspec
from litestar._openapi.schema_generation.plugins.struct import StructSchemaPlugin
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import HeaderParameter
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition

from core.domains import DomainMap
from core.ids import Id

# The domain map's names, known once the app has its map.
TRACKS = "tracks"
DOMAINS = "domains"


@dataclass(frozen=True)
class Text:
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    def schema(self) -> Schema:
        return Schema(type=OpenAPIType.STRING, **_set(asdict(self)))

    def header(self, name: str, *, required: bool, description: str) -> HeaderParameter:
        """A header parameter of this text: a header is absent or text, never null."""
        keywords = {"type": OpenAPIType.STRING, "one_of": None, **_set(asdict(self))}
        return HeaderParameter(
            name=name, required=required, description=description, schema_extra=keywords
        )


def _set(keywords: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in keywords.items() if value is not None}


@dataclass(frozen=True)
class OneOf:
    """One of these names, or of the domain map's (TRACKS, DOMAINS)."""

    names: tuple[str, ...] | str


def plugins(domain_map: DomainMap) -> list[OpenAPISchemaPlugin]:
    return [_DeclaredText(domain_map), _ClosedStruct(), _WireId()]


class _WireId(OpenAPISchemaPlugin):
    """An id is an int inside and a string on the wire (core/ids.py)."""

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return field_definition.annotation is Id

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        return Schema(type=OpenAPIType.STRING, pattern="^[0-9]+$")


class _DeclaredText(OpenAPISchemaPlugin):
    def __init__(self, domain_map: DomainMap) -> None:
        self.map_names = {TRACKS: sorted(domain_map.tracks), DOMAINS: sorted(domain_map.domains)}

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        # An optional one is declared as the union of null and what its other arm declares.
        return not field_definition.is_union and _rule(field_definition) is not None

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        rule = _rule(field_definition)
        if isinstance(rule, OneOf):
            names = rule.names
            return Schema(
                type=OpenAPIType.STRING,
                enum=list(self.map_names[names] if isinstance(names, str) else names),
            )
        assert rule is not None
        return rule.schema()


def _rule(field_definition: FieldDefinition) -> Text | OneOf | None:
    return next((m for m in field_definition.metadata if isinstance(m, Text | OneOf)), None)


class _ClosedStruct(StructSchemaPlugin):
    """msgspec's forbid_unknown_fields, said as JSON Schema says it."""

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return super().is_plugin_supported_field(field_definition) and _forbids_unknown_fields(
            field_definition.annotation
        )

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        schema.additional_properties = False
        return schema


def _forbids_unknown_fields(annotation: Any) -> bool:
    info = msgspec.inspect.type_info(annotation)
    return isinstance(info, msgspec.inspect.StructType) and info.forbid_unknown_fields
