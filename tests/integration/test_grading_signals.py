"""What grading tells QA: per mission and per variant, the graded submissions, the pass rate and
the median time from a serve to a passing fix, in the API, the review queue's flag, the
reviewer UI (with each fix as a diff against the served code) and /metrics."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
from litestar import Litestar
from litestar.testing import AsyncTestClient

from qa.missions import FLAG_AFTER_SUBMISSIONS
from server.auth import Role
from tests.support.grading import PYTHON, instance_of, stock
from tests.support.http import bearer, sign_in

Client = AsyncTestClient[Litestar]


async def graded_submissions(
    pool: asyncpg.Pool,
    mission_id: int,
    statuses: list[str],
    after: timedelta,
    variant_id: int | None = None,
) -> None:
    """One instance per submission (of `variant_id`, else of none), each graded `after` its
    serve, as a grader would leave it."""
    for number, status in enumerate(statuses):
        user = f"candidate-{number}" if variant_id is None else f"candidate-{variant_id}-{number}"
        instance_id = await instance_of(pool, mission_id, user, variant_id)
        await pool.execute(
            """INSERT INTO submissions (instance_id, mission_id, user_id, language,
                   instance_created_at, caller, idempotency_key, fingerprint, files, code_files,
                   visible_test_files, hidden_test_files, status, attempt, created_at,
                   finished_at, visible_passed, visible_failed, visible_total, hidden_passed,
                   hidden_failed, hidden_total)
               SELECT i.id, i.mission_id, i.user_id, 'python', i.created_at, 'test', $2, '\\x00',
                      $4, $4, '{}', '{}', $3, 1, i.created_at + $5, i.created_at + $5,
                      2, 0, 2, CASE WHEN $3 = 'passed' THEN 2 ELSE 0 END,
                      CASE WHEN $3 = 'passed' THEN 0 ELSE 2 END, 2
               FROM mission_instances i WHERE i.id = $1""",
            instance_id,
            f"key-{mission_id}-{variant_id}-{number}",
            status,
            {"pricing.py": f"def total(prices, discount):\n    return {number}\n"},
            after,
        )


async def test_a_mission_nobody_or_everybody_solves_is_flagged_and_errors_count_for_neither(
    client: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    """An error judged no fix (the sandbox failed, or the run proved nothing): it is left out
    of the pass rate, so errors neither make a mission look unsolvable nor hide a mission that
    everybody solves."""
    reviewer = bearer(keys["qa_reviewer"])
    enough, errors = FLAG_AFTER_SUBMISSIONS, ["error"] * 5
    nobody = await stock(pool, PYTHON)
    await graded_submissions(pool, nobody, ["failed"] * enough + errors, timedelta(0))
    everybody = await stock(pool, PYTHON)
    await graded_submissions(pool, everybody, errors + ["passed"] * enough, timedelta(minutes=3))
    broken = await stock(pool, PYTHON)
    await graded_submissions(pool, broken, ["error"] * (enough + 5), timedelta(0))
    some = await stock(pool, PYTHON)
    statuses = ["passed", "passed", "failed", "passed"] + ["error"] * enough
    await graded_submissions(pool, some, statuses, timedelta(minutes=10))

    read = (await client.get(f"/v1/qa/missions/{nobody}", headers=reviewer)).json()
    assert read["submissions"] == {
        "count": enough,
        "passed": 0,
        "pass_rate": 0.0,
        "median_duration_s": None,
    }
    assert read["flag"] == read_flag(enough)
    read = (await client.get(f"/v1/qa/missions/{everybody}", headers=reviewer)).json()
    assert read["submissions"] == {
        "count": enough,
        "passed": enough,
        "pass_rate": 1.0,
        "median_duration_s": 180.0,
    }
    assert read["flag"] == f"everybody solves it: all {enough} submissions passed"
    read = (await client.get(f"/v1/qa/missions/{broken}", headers=reviewer)).json()
    assert read["submissions"]["count"] == 0
    assert read["flag"] is None
    read = (await client.get(f"/v1/qa/missions/{some}", headers=reviewer)).json()
    assert read["submissions"] == {
        "count": 4,
        "passed": 3,
        "pass_rate": 0.75,
        "median_duration_s": 600.0,
    }
    assert read["flag"] is None

    queue = await client.get("/v1/qa/missions?status=approved", headers=reviewer)
    flags = {mission["id"]: mission["flag"] for mission in queue.json()["missions"]}
    assert flags == {
        str(nobody): read_flag(enough),
        str(everybody): f"everybody solves it: all {enough} submissions passed",
        str(broken): None,
        str(some): None,
    }

    await sign_in(client, keys["qa_reviewer"])
    page = await client.get("/qa/?status=approved")
    assert read_flag(enough) in page.text
    assert f"everybody solves it: all {enough} submissions passed" in page.text
    page = await client.get(f"/qa/missions/{some}")
    assert "3 of 4 graded submissions passed" in page.text
    assert "+    return 3" in page.text, "each fix is shown against the served code"


async def test_each_variant_counts_the_submissions_of_its_own_instances(
    client: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    mission = await stock(pool, PYTHON)
    first = await pool.fetchval("SELECT id FROM mission_variants WHERE mission_id = $1", mission)
    second = await pool.fetchval(
        """INSERT INTO mission_variants (mission_id, sabotaged_files, bug_summary, proof,
               provider, max_serves, content_hash)
           SELECT mission_id, sabotaged_files, 'another bug', proof, provider, max_serves,
                  '\x02'
           FROM mission_variants WHERE id = $1
           RETURNING id""",
        first,
    )
    await graded_submissions(pool, mission, ["passed", "failed"], timedelta(minutes=4), first)
    await graded_submissions(pool, mission, ["error", "failed", "error"], timedelta(0), second)

    read = await client.get(f"/v1/qa/missions/{mission}", headers=bearer(keys["qa_reviewer"]))
    by_variant = {variant["id"]: variant["submissions"] for variant in read.json()["variants"]}
    assert by_variant == {
        str(first): {"count": 2, "passed": 1, "pass_rate": 0.5, "median_duration_s": 240.0},
        str(second): {"count": 1, "passed": 0, "pass_rate": 0.0, "median_duration_s": None},
    }
    assert read.json()["submissions"]["count"] == 3

    await sign_in(client, keys["qa_reviewer"])
    page = await client.get(f"/qa/missions/{mission}")
    assert "1 of 2 passed, median 240 s" in page.text
    assert "0 of 1 passed" in page.text


def read_flag(count: int) -> str:
    return f"nobody solves it: 0 of {count} submissions passed"


async def test_metrics_count_the_gradings_pending_and_running(
    client: Client, pool: asyncpg.Pool
) -> None:
    mission = await stock(pool, PYTHON)
    await graded_submissions(pool, mission, ["failed", "failed", "failed"], timedelta(0))
    await pool.execute("UPDATE submissions SET status = 'pending' WHERE user_id = 'candidate-0'")
    await pool.execute("UPDATE submissions SET status = 'running' WHERE user_id = 'candidate-1'")
    text = (await client.get("/metrics")).text
    assert "\nwarmpool_gradings_pending 1.0\n" in text
    assert "\nwarmpool_gradings_running 1.0\n" in text


async def test_metrics_count_graded_submissions_per_domain_as_gradings_end(
    client: Client, pool: asyncpg.Pool
) -> None:
    mission = await stock(pool, PYTHON)
    await graded_submissions(pool, mission, ["passed", "failed", "error"], timedelta(0))
    # A grading that ends counts once, whatever else its row goes through.
    await pool.execute(
        "UPDATE submissions SET status = 'running' WHERE user_id IN ('candidate-1', 'candidate-2')"
    )
    await pool.execute("UPDATE submissions SET heartbeat_at = now() WHERE status = 'running'")
    await pool.execute("UPDATE submissions SET status = 'passed' WHERE user_id = 'candidate-1'")

    text = (await client.get("/metrics")).text
    # Judged: two passed and one failed; the error judged no fix.
    assert '\nwarmpool_submissions_graded_total{domain="python-backend"} 3.0\n' in text
    assert '\nwarmpool_submissions_passed_total{domain="python-backend"} 2.0\n' in text
    assert '\nwarmpool_submissions_errored_total{domain="python-backend"} 1.0\n' in text
    assert '\nwarmpool_submissions_graded_total{domain="marketing-copy"} 0.0\n' in text


async def test_metrics_give_the_time_to_a_passing_submission_per_domain(
    client: Client, pool: asyncpg.Pool
) -> None:
    """As a histogram whose median (histogram_quantile) is the domain's, kept as gradings pass."""
    quick, slow = await stock(pool, PYTHON), await stock(pool, PYTHON)
    await graded_submissions(pool, quick, ["passed", "failed"], timedelta(minutes=2))
    await graded_submissions(pool, slow, ["error", "passed", "passed"], timedelta(minutes=10))
    # One that passes later, as a grading ends.
    await pool.execute(
        "UPDATE submissions SET status = 'running' WHERE mission_id = $1 AND status = 'failed'",
        quick,
    )
    await pool.execute("UPDATE submissions SET status = 'passed' WHERE status = 'running'")

    text = (await client.get("/metrics")).text
    histogram = "warmpool_submission_time_to_pass_seconds"
    python = 'domain="python-backend"'
    for bound, passes in [("60.0", 0), ("300.0", 2), ("900.0", 4), ("86400.0", 4), ("+Inf", 4)]:
        assert f'\n{histogram}_bucket{{{python},le="{bound}"}} {passes}.0\n' in text, bound
    assert f"\n{histogram}_count{{{python}}} 4.0\n" in text
    assert f"\n{histogram}_sum{{{python}}} {2 * 120 + 2 * 600}.0\n" in text
    assert f'\n{histogram}_count{{domain="marketing-copy"}} 0.0\n' in text
