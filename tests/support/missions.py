"""Missions for serving tests, written straight into the test database."""

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
) -> int:
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
    return mission_id
