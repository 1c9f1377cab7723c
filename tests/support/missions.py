"""Missions for serving tests, written straight into the test database, each with its
variants (planted bugs) and their identity renderings, ready to serve: each rendering as often
as its variant, so that serving is tested apart from how renderings are made."""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime

from core.sql import Executor

_numbers = itertools.count()


async def add_mission(
    pool: Executor,
    domain: str = "python-backend",
    *,
    max_serves: int = 100,
    qa_status: str = "approved",
    retired: bool = False,
    job_id: int | None = None,
    reviewed_at: datetime | None = None,
    variants: int = 1,
    bug_share: int | None = None,
) -> int:
    """With `variants` bugs, each served at most `bug_share` times (None: the mission's limit,
    as a mission stored before variants has)."""
    number = next(_numbers)
    language = {"marketing-copy": "none", "sql-data": "sql", "javascript-frontend": "javascript"}
    mission_id: int = await pool.fetchval(
        """INSERT INTO missions (domain, kind, language, title, brief, gold_files, test_files,
               sabotaged_files, bug_summary, proof, provider, qa_status, max_serves,
               retired_at, retire_reason, content_hash, job_id, reviewed_at)
           VALUES ($1, $2, $3, $4, 'Fix the bug.', $5, $6, $7, 'the secret bug', '{}', 'test',
                   $8, $9, CASE WHEN $10 THEN now() END, CASE WHEN $10 THEN 'test' END, $11,
                   $12, $13)
           RETURNING id""",
        domain,
        "non_technical" if domain == "marketing-copy" else "technical",
        language.get(domain, "python"),
        f"Mission {number} of {domain}",
        {"solution.py": "GOLD = True\n"},
        {"test_solution.py": "def test_it(): pass\n"},
        {"solution.py": "GOLD = False\n"},
        qa_status,
        max_serves,
        retired,
        hashlib.sha256(f"{domain}-{number}".encode()).digest(),
        job_id,
        reviewed_at,
    )
    for variant in range(variants):
        await pool.execute(
            """WITH variant AS (
                   INSERT INTO mission_variants (mission_id, sabotaged_files, bug_summary, proof,
                          provider, max_serves, rendered_serves, content_hash)
                   VALUES ($1, $2, $3, '{"verdict": "test"}', 'test', $4, $4, $5)
                   RETURNING id, sabotaged_files, max_serves
               )
               INSERT INTO mission_renderings (variant_id, mission_id, files, gold_files,
                      test_files, hidden_test_files, renderer, proof, status, max_serves)
               SELECT id, $1, sabotaged_files || $6::jsonb, $7, $6, '{}', 'identity',
                      '{"verdict": "test"}', 'ready', max_serves
               FROM variant""",
            mission_id,
            # The first variant is the mission's own sabotage; each further one is distinct.
            {"solution.py": "GOLD = False\n" + variant * "# another bug\n"},
            f"the secret bug {variant}",
            bug_share or max_serves,
            hashlib.sha256(f"{domain}-{number}-{variant}".encode()).digest(),
            {"test_solution.py": "def test_it(): pass\n"},
            {"solution.py": "GOLD = True\n"},
        )
    return mission_id


async def serve_identity_as_often_as_its_variant(pool: Executor, mission_id: int) -> None:
    """Let each variant of a stored mission serve its whole share from its identity rendering
    (stored to serve once in a domain with code), for tests of what follows a serve that need
    many instances of one mission rather than renderings of their own."""
    await pool.execute(
        """WITH variant AS (
               UPDATE mission_variants SET rendered_serves = max_serves
               WHERE mission_id = $1 RETURNING id, max_serves
           )
           UPDATE mission_renderings r SET max_serves = variant.max_serves
           FROM variant WHERE r.variant_id = variant.id AND r.renderer = 'identity'""",
        mission_id,
    )
