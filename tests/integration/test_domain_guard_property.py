"""The domain guard as a property: for random domain maps, pools and serves on the real
database, a serve never returns a mission outside the track's domains, and answers "no
stock" only when the track's domains hold nothing this user lacks."""

from typing import Any

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import domains
from pool import serving
from pool.guard import allowed_domains
from tests.support.missions import add_mission

DOMAINS = ["alpha", "beta", "gamma", "delta"]
TRACKS = ["first", "second", "third"]
USERS = ["ada", "bob", "cy"]

domain_maps = st.dictionaries(
    st.sampled_from(TRACKS),
    st.lists(st.sampled_from(DOMAINS), min_size=1, max_size=len(DOMAINS), unique=True),
    min_size=1,
).map(
    lambda tracks: domains.parse(
        {
            "tracks": tracks,
            "domains": {
                name: {"kind": "technical", "language": "python", "target": 1} for name in DOMAINS
            },
        },
        "generated map",
    )
)
pools = st.lists(st.tuples(st.sampled_from(DOMAINS), st.integers(1, 3)), max_size=8)


@settings(
    max_examples=40,
    deadline=None,
    # One database for every example: each one starts from empty tables.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(domain_map=domain_maps, missions=pools, data=st.data())
async def test_a_serve_never_leaves_the_tracks_domains(
    pool: asyncpg.Pool, domain_map: domains.DomainMap, missions: Any, data: st.DataObject
) -> None:
    await pool.execute(
        "TRUNCATE submissions, rendering_fingerprints, mission_instances, mission_renderings,"
        " mission_variants, missions"
    )
    for domain, max_serves in missions:
        await add_mission(pool, domain, max_serves=max_serves)
    serves = data.draw(
        st.lists(st.tuples(st.sampled_from(USERS), st.sampled_from(sorted(domain_map.tracks))))
    )
    async with pool.acquire() as connection:
        for user, track in serves:
            allowed = {domain.name for domain in allowed_domains(domain_map, track)}
            async with connection.transaction():
                instance = await serving.serve(
                    connection,
                    user_id=user,
                    track=track,
                    domains=allowed_domains(domain_map, track),
                )
            if instance is not None:
                assert instance.domain in allowed
                stored = await connection.fetchval(
                    "SELECT domain FROM missions WHERE id = $1", instance.mission_id
                )
                assert stored in allowed
                continue
            left = await connection.fetchval(
                """SELECT count(*) FROM missions m
                   WHERE m.domain = ANY($1) AND m.qa_status = 'approved' AND m.retired_at IS NULL
                     AND NOT EXISTS (SELECT 1 FROM mission_instances i
                                     WHERE i.mission_id = m.id AND i.user_id = $2)""",
                sorted(allowed),
                user,
            )
            assert left == 0, f"{user} on {track} got nothing, but {left} missions were servable"
