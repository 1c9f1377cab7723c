"""The domain guard: a track is served only the domains the domain map allows it."""

from __future__ import annotations

from core.domains import Domain, DomainMap


class UnknownTrack(Exception):
    def __init__(self, track: str, domain_map: DomainMap) -> None:
        super().__init__(
            f"unknown track {track!r}; valid tracks: {', '.join(sorted(domain_map.tracks))}"
        )


def allowed_domains(domain_map: DomainMap, track: str) -> tuple[Domain, ...]:
    if track not in domain_map.tracks:
        raise UnknownTrack(track, domain_map)
    return domain_map.domains_for(track)
