"""The domain map: which mission domains each track may be served, and how each domain behaves.

Loaded and validated once at start-up. A fault stops start-up with a message that names the
file, the entry and what is wrong, so an operator can fix the map without reading code.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import msgspec
import yaml

Kind = Literal["technical", "non_technical"]
Language = Literal["python", "javascript", "sql", "none"]
Review = Literal["human", "proof"]
SabotagePolicy = Literal["all", "at_least_one"]
# Where a variant job's bug comes from: the provider that writes missions (one sabotage call a
# try, through the ledger and the budget), or the procedural saboteur (at no model cost).
VariantSource = Literal["model", "saboteur"]

DEFAULT_RETIRE_AFTER: dict[str, int] = {"technical": 100, "non_technical": 50}
DEFAULT_BUG_SHARE = 5


class DomainMapError(ValueError):
    """The domain map cannot be used; the message says where and why."""


class Domain(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kind: Kind
    language: Language
    target: int
    retire_after: int
    review: Review = "human"
    sabotage_must_fail: SabotagePolicy = "all"
    retire_jitter: bool = True
    # At most this many candidates get the same planted bug (variant) of one mission; domains
    # with code only, since a document's flaw is reviewed by a person, not proven.
    bug_share: int = DEFAULT_BUG_SHARE
    # At most this many candidates of one cohort get the same mission; None: no limit.
    cohort_share: int | None = None
    variant_source: VariantSource = "model"

    def variant_serves(self, mission_serves: int) -> int:
        """A new variant's serve limit, in a mission that may be served `mission_serves` times:
        its bug_share in a domain with code, the whole mission in a domain without."""
        if self.language == "none":
            return mission_serves
        return min(self.bug_share, mission_serves)

    def serve_limit(self, seed: int) -> int:
        """A new mission's serve limit: `retire_after`, lowered by up to a tenth at random
        (seeded) unless `retire_jitter` is off. Least-served-first keeps the counts of
        missions made together level, so equal limits would retire them all in the same
        minute and empty the pool off a cliff."""
        if not self.retire_jitter:
            return self.retire_after
        return self.retire_after - random.Random(f"serve-limit:{seed}").randint(
            0, self.retire_after // 10
        )


class DomainMap(msgspec.Struct, frozen=True):
    tracks: dict[str, tuple[str, ...]]
    domains: dict[str, Domain]

    def domains_for(self, track: str) -> tuple[Domain, ...]:
        return tuple(self.domains[name] for name in self.tracks[track])


_DOMAIN_KEYS: dict[str, str] = {
    "kind": "technical | non_technical",
    "language": "python | javascript | sql | none",
    "target": "a whole number of approved missions to keep ready (0 or more)",
    "retire_after": "a positive whole number of serves",
    "review": "human | proof",
    "sabotage_must_fail": "all | at_least_one",
    "retire_jitter": "true | false (lower each mission's serve limit slightly, at random)",
    "bug_share": "a positive whole number of candidates who may get the same planted bug",
    "cohort_share": "a positive whole number of candidates of one cohort per mission",
    "variant_source": "model | saboteur (where the bugs of variant jobs come from)",
}


def load(path: Path) -> DomainMap:
    try:
        # From the file itself, so that YAML's error positions name it; as bytes, so that
        # YAML also reports a file that is not UTF-8.
        with path.open("rb") as stream:
            document = yaml.safe_load(stream)
    except OSError as error:
        raise DomainMapError(f"{path}: cannot read the domain map ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise DomainMapError(f"{path}: not valid YAML: {error}") from None
    return parse(document, str(path))


def parse(document: object, source: str) -> DomainMap:
    top = _mapping(document, source, "the document")
    _no_unknown_keys(top, {"tracks": "", "domains": ""}, source, "the document")
    raw_domains = _mapping(top.get("domains"), source, "domains")
    raw_tracks = _mapping(top.get("tracks"), source, "tracks")
    if not raw_domains:
        raise DomainMapError(f"{source}: domains: define at least one domain")
    if not raw_tracks:
        raise DomainMapError(f"{source}: tracks: define at least one track")
    domains = {str(name): _domain(str(name), raw, source) for name, raw in raw_domains.items()}
    tracks = {
        str(track): _track(str(track), names, domains, source)
        for track, names in raw_tracks.items()
    }
    return DomainMap(tracks=tracks, domains=domains)


def _domain(name: str, raw: object, source: str) -> Domain:
    where = f"domains.{name}"
    entry = _mapping(raw, source, where)
    _no_unknown_keys(entry, _DOMAIN_KEYS, source, where)
    kind = _choice(entry, "kind", Kind, source, where, default=None)
    language = _choice(entry, "language", Language, source, where, default=None)
    review = _choice(entry, "review", Review, source, where, default="human")
    target = _whole_number(entry, "target", source, where, default=None, minimum=0)
    retire_after = _whole_number(
        entry, "retire_after", source, where, default=DEFAULT_RETIRE_AFTER[kind], minimum=1
    )
    if "bug_share" in entry and language == "none":
        raise DomainMapError(
            f"{source}: {where}.bug_share: a domain without code (language none) has one "
            "flaw per mission, reviewed by a person; remove bug_share or give it a language"
        )
    bug_share = _whole_number(
        entry, "bug_share", source, where, default=DEFAULT_BUG_SHARE, minimum=1
    )
    cohort_share = (
        _whole_number(entry, "cohort_share", source, where, default=None, minimum=1)
        if "cohort_share" in entry
        else None
    )
    if "variant_source" in entry and language == "none":
        raise DomainMapError(
            f"{source}: {where}.variant_source: a domain without code (language none) has one "
            "flaw per mission and no variants; remove variant_source or give it a language"
        )
    if review == "proof" and (kind != "technical" or language == "none"):
        raise DomainMapError(
            f"{source}: {where}.review: 'proof' needs a technical domain with code to run, "
            f"got kind {kind!r} and language {language!r}; use review: human"
        )
    return Domain(
        name=name,
        kind=kind,
        language=language,
        target=target,
        retire_after=retire_after,
        review=review,
        sabotage_must_fail=_choice(
            entry, "sabotage_must_fail", SabotagePolicy, source, where, default="all"
        ),
        retire_jitter=_flag(entry, "retire_jitter", source, where, default=True),
        bug_share=bug_share,
        cohort_share=cohort_share,
        variant_source=_choice(
            entry, "variant_source", VariantSource, source, where, default="model"
        ),
    )


def _track(
    track: str, names: object, domains: Mapping[str, Domain], source: str
) -> tuple[str, ...]:
    where = f"tracks.{track}"
    if not isinstance(names, list) or not names:
        raise DomainMapError(f"{source}: {where}: expected a list of domain names, got {names!r}")
    for name in names:
        if name not in domains:
            raise DomainMapError(
                f"{source}: {where} names domain {name!r}, which is not defined under domains"
                f"{_did_you_mean(str(name), domains)}"
            )
    return tuple(str(name) for name in names)


def _mapping(value: object, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DomainMapError(f"{source}: {where}: expected a mapping, got {value!r}")
    return value


def _no_unknown_keys(
    entry: Mapping[str, Any], known: Mapping[str, str], source: str, where: str
) -> None:
    for key in entry:
        if key not in known:
            raise DomainMapError(
                f"{source}: {where}: unknown key {key!r}{_did_you_mean(str(key), known)}; "
                f"known keys: {', '.join(known)}"
            )


def _choice(
    entry: Mapping[str, Any], key: str, choices: Any, source: str, where: str, default: str | None
) -> Any:
    allowed = get_args(choices)
    value = entry.get(key, default)
    if value is None:
        raise DomainMapError(
            f"{source}: {where}.{key}: missing; expected one of {' | '.join(allowed)}"
        )
    if value not in allowed:
        raise DomainMapError(
            f"{source}: {where}.{key}: expected one of {' | '.join(allowed)}, got {value!r}"
            f"{_did_you_mean(str(value), allowed)}"
        )
    return value


def _whole_number(
    entry: Mapping[str, Any], key: str, source: str, where: str, default: int | None, minimum: int
) -> int:
    value = entry.get(key, default)
    if value is None:
        raise DomainMapError(f"{source}: {where}.{key}: missing; expected {_DOMAIN_KEYS[key]}")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DomainMapError(
            f"{source}: {where}.{key}: expected {_DOMAIN_KEYS[key]}, got {value!r}"
        )
    return value


def _flag(entry: Mapping[str, Any], key: str, source: str, where: str, default: bool) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise DomainMapError(
            f"{source}: {where}.{key}: expected {_DOMAIN_KEYS[key]}, got {value!r}"
        )
    return value


def _did_you_mean(word: str, candidates: Any) -> str:
    close = difflib.get_close_matches(word, [str(c) for c in candidates], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
