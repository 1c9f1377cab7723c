import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.domains import DomainMapError, load, parse

ROOT = Path(__file__).resolve().parents[2]

GOOD = {
    "tracks": {"backend-engineer": ["python-backend"], "marketing-manager": ["marketing-copy"]},
    "domains": {
        "python-backend": {"kind": "technical", "language": "python", "target": 20},
        "marketing-copy": {
            "kind": "non_technical",
            "language": "none",
            "target": 5,
            "retire_after": 30,
        },
    },
}


def test_the_shipped_map_loads() -> None:
    domain_map = load(ROOT / "domain_map.yaml")
    assert "backend-engineer" in domain_map.tracks
    assert {domain.language for domain in domain_map.domains.values()} == {
        "python",
        "javascript",
        "sql",
        "none",
    }


def test_kind_defaults_and_overrides() -> None:
    domain_map = parse(GOOD, "map.yaml")
    assert domain_map.domains["python-backend"].retire_after == 100
    assert domain_map.domains["marketing-copy"].retire_after == 30
    assert domain_map.domains["python-backend"].review == "human"
    assert domain_map.domains["python-backend"].sabotage_must_fail == "all"
    assert [domain.name for domain in domain_map.domains_for("backend-engineer")] == [
        "python-backend"
    ]


def test_bug_share_and_cohort_share_default_to_five_and_no_limit() -> None:
    default = parse(GOOD, "map.yaml").domains
    assert (default["python-backend"].bug_share, default["python-backend"].cohort_share) == (
        5,
        None,
    )
    assert default["python-backend"].variant_serves(100) == 5
    assert default["marketing-copy"].variant_serves(30) == 30, "no code: one flaw for all"
    shared = parse(
        broken(domains__python_backend__bug_share=2, domains__python_backend__cohort_share=3),
        "map.yaml",
    ).domains["python-backend"]
    assert (shared.bug_share, shared.cohort_share, shared.variant_serves(1)) == (2, 3, 1)


def test_variants_come_from_the_model_unless_the_domain_says_the_saboteur() -> None:
    assert parse(GOOD, "map.yaml").domains["python-backend"].variant_source == "model"
    procedural = parse(broken(domains__python_backend__variant_source="saboteur"), "map.yaml")
    assert procedural.domains["python-backend"].variant_source == "saboteur"


def broken(**changes: object) -> dict[str, object]:
    document: dict[str, Any] = yaml.safe_load(yaml.safe_dump(GOOD))
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = document
        for parent in parents:
            node = node[parent.replace("_", "-") if parent not in ("tracks", "domains") else parent]
        node[leaf] = value
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            broken(tracks__backend_engineer=["python-backnd"]),
            "map.yaml: tracks.backend_engineer names domain 'python-backnd', which is not defined "
            "under domains (did you mean 'python-backend'?)",
        ),
        (
            broken(domains__python_backend__kind="techincal"),
            "map.yaml: domains.python-backend.kind: expected one of technical | non_technical, got "
            "'techincal' (did you mean 'technical'?)",
        ),
        (
            broken(domains__python_backend__language="rust"),
            "domains.python-backend.language: expected one of python | javascript | sql | none, got 'rust'",
        ),
        (
            broken(domains__python_backend__colour="red"),
            "domains.python-backend: unknown key 'colour'",
        ),
        (
            broken(domains__python_backend__target=-1),
            "domains.python-backend.target: expected a whole number",
        ),
        (
            broken(domains__python_backend__retire_after=0),
            "retire_after: expected a positive whole number",
        ),
        (
            broken(domains__marketing_copy__review="proof"),
            "review: 'proof' needs a technical domain",
        ),
        (
            broken(domains__python_backend__bug_share=0),
            "domains.python-backend.bug_share: expected a positive whole number of candidates",
        ),
        (
            broken(domains__python_backend__cohort_share="two"),
            "domains.python-backend.cohort_share: expected a positive whole number",
        ),
        (
            broken(domains__marketing_copy__bug_share=3),
            "domains.marketing-copy.bug_share: a domain without code (language none) has one flaw",
        ),
        (
            broken(domains__python_backend__variant_source="modle"),
            "domains.python-backend.variant_source: expected one of model | saboteur, got "
            "'modle' (did you mean 'model'?)",
        ),
        (
            broken(domains__marketing_copy__variant_source="saboteur"),
            "domains.marketing-copy.variant_source: a domain without code (language none)",
        ),
        ({"tracks": {}, "domains": {}}, "domains: define at least one domain"),
        (["not", "a", "map"], "the document: expected a mapping"),
        ({**GOOD, "extra": 1}, "the document: unknown key 'extra'"),
    ],
)
def test_a_bad_map_names_the_file_the_entry_and_the_fault(document: object, message: str) -> None:
    with pytest.raises(DomainMapError) as raised:
        parse(document, "map.yaml")
    assert message in str(raised.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(DomainMapError, match="cannot read the domain map"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracks: [unclosed")
    with pytest.raises(DomainMapError, match="not valid YAML"):
        load(bad)
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("tracks:\n  café: [x]\n".encode("latin-1"))
    with pytest.raises(
        DomainMapError, match=rf"(?s)not valid YAML: .*in \"{re.escape(str(latin1))}\""
    ):
        load(latin1)
