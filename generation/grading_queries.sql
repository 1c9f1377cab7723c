-- Queries of the grading queue (submissions). As for generation jobs, every state change is
-- conditional on the expected status and, once claimed, on the attempt (the fencing token):
-- zero rows means another actor won, and the loser writes nothing.
-- $n::timestamptz "now" parameters are null in production and set by tests to move time.


-- name: grading_user_lock
-- Serializes one user's submissions, so counting their active ones and inserting is atomic.
-- advisory lock: grading_user (core/locks.py)
SELECT pg_advisory_xact_lock(6, hashtext($1::text));

-- name: submission_by_key
SELECT id, fingerprint FROM submissions WHERE caller = $1::text AND idempotency_key = $2::text;

-- name: submission_insert_within_limits
-- One statement: the user's pending and running submissions and the instance's gradings in
-- the window of $19 seconds (both exact under grading_user_lock: an instance has one user),
-- the pending depth (soft: concurrent submissions may overshoot it by their number), and the
-- insert only when all are under their limits. The unique key (caller, key) makes a
-- concurrent twin with the same key insert nothing; the caller then reads the winner's row.
WITH active AS (
    SELECT count(*) AS submissions FROM submissions
    WHERE user_id = $3::text AND status IN ('pending', 'running')
),
depth AS (
    SELECT count(*) AS pending FROM submissions WHERE status = 'pending'
),
recent AS (
    SELECT count(*) AS gradings,
           extract(epoch FROM min(created_at) + make_interval(secs => $19::float8)
                              - coalesce($17::timestamptz, now())) AS frees_in_s
    FROM submissions
    WHERE instance_id = $1::bigint
      AND created_at > coalesce($17::timestamptz, now()) - make_interval(secs => $19::float8)
),
inserted AS (
    INSERT INTO submissions (
        instance_id, mission_id, user_id, language, instance_created_at, created_by, caller,
        idempotency_key, fingerprint, files, code_files, visible_test_files, hidden_test_files,
        hidden_test_ids, created_at
    )
    SELECT $1::bigint, $2::bigint, $3::text, $4::text, $5::timestamptz, $6::bigint, $7::text,
           $8::text, $9::bytea, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14::text[],
           coalesce($17::timestamptz, now())
    FROM active, depth, recent
    WHERE active.submissions < $15::int AND depth.pending < $16::int
      AND recent.gradings < $18::int
    ON CONFLICT ON CONSTRAINT submissions_idempotency_unique DO NOTHING
    RETURNING id
)
SELECT (SELECT id FROM inserted) AS submission_id, active.submissions AS active,
       depth.pending, recent.gradings AS recent, recent.frees_in_s
FROM active, depth, recent;

-- name: graders_wake
-- After the submission has committed, in a transaction of its own (see dispatchers_wake).
SELECT pg_notify('warmpool_gradings', '');

-- name: submission_view
-- With $2, only one that key made.
SELECT * FROM submission_views WHERE id = $1::bigint AND ($2::bigint IS NULL OR created_by = $2::bigint);

-- name: submissions_of_instance
SELECT * FROM submission_views
WHERE instance_id = $1::bigint AND ($3::bigint IS NULL OR created_by = $3::bigint)
ORDER BY created_at DESC, id DESC
LIMIT $2::int;

-- name: grading_dispatch_lock
-- Taken first in the claim's transaction: one claim at a time counts and claims, so the count
-- cannot go stale between the two.
-- advisory lock: grading_dispatch (core/locks.py)
SELECT pg_advisory_xact_lock(7, 0);

-- name: submissions_claim_within_cap
-- Run after grading_dispatch_lock, in READ COMMITTED: this statement's snapshot is taken once
-- the lock is granted, so it counts every claim that committed before. SKIP LOCKED passes over
-- rows the sweeper holds; the status check in the UPDATE makes the claim conditional.
WITH running AS (
    SELECT count(*) AS gradings FROM submissions WHERE status = 'running'
),
chosen AS (
    SELECT s.id FROM submissions s, running
    WHERE s.status = 'pending' AND s.language = ANY($4::text[])
    ORDER BY s.created_at, s.id
    LIMIT greatest(0, least($1::int, $2::int - (SELECT gradings FROM running)))
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE submissions s
SET status = 'running', attempt = s.attempt + 1, worker_id = $3::text,
    started_at = coalesce($5::timestamptz, now()), heartbeat_at = coalesce($5::timestamptz, now())
FROM chosen
WHERE s.id = chosen.id AND s.status = 'pending'
RETURNING s.id, s.attempt, s.mission_id, s.user_id, s.language, s.code_files,
          s.visible_test_files, s.hidden_test_files, s.hidden_test_ids;

-- name: gradings_heartbeat_if_running
-- Returns the gradings this worker still holds; one missing from the answer was taken back.
UPDATE submissions s SET heartbeat_at = coalesce($3::timestamptz, now())
FROM unnest($1::bigint[], $2::int[]) AS held(id, attempt)
WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
RETURNING s.id;

-- name: grading_finish_if_running
UPDATE submissions
SET status = $3::text, finished_at = now(), visible_passed = $4::int, visible_failed = $5::int,
    visible_total = $6::int, hidden_passed = $7::int, hidden_failed = $8::int,
    hidden_total = $9::int, tests = $10::jsonb, duration_s = $11::float8, error = $12::text
WHERE id = $1::bigint AND attempt = $2::int AND status = 'running'
RETURNING id;

-- name: gradings_release_if_running
-- At a worker's stop: its gradings go back to the queue under a new attempt, keeping their
-- place in line (created_at).
UPDATE submissions s
SET status = 'pending', worker_id = NULL, started_at = NULL, heartbeat_at = NULL
FROM unnest($1::bigint[], $2::int[]) AS held(id, attempt)
WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
RETURNING s.id;

-- name: gradings_release_if_not_held
-- Gradings running under this grader's identity that it does not run: a claim whose answer
-- never reached it (a timeout, a broken connection) committed them all the same. The caller
-- runs this under its claim lock, never beside one of its claims, so none is in flight. They
-- keep their attempt: the next claim's is a new one, which fences off the lost claim.
UPDATE submissions
SET status = 'pending', worker_id = NULL, started_at = NULL, heartbeat_at = NULL
WHERE status = 'running' AND worker_id = $1::text AND NOT (id = ANY($2::bigint[]))
RETURNING id, attempt;

-- name: gradings_take_back_if_stale
-- The sweeper: a grading whose worker stopped heartbeating goes back to the queue (the next
-- claim's attempt fences off the dead worker), unless it has been taken back $2 times already:
-- then it ends as an error, since a submission that kills its worker each time never would.
-- Rows locked in id order, as nothing else locks several, so the sweepers never deadlock.
UPDATE submissions
SET status = CASE WHEN attempt >= $2::int THEN 'error' ELSE 'pending' END,
    finished_at = CASE WHEN attempt >= $2::int THEN coalesce($3::timestamptz, now()) END,
    error = CASE WHEN attempt >= $2::int
                 THEN 'grading was interrupted ' || attempt || ' times (its worker stopped)' END,
    worker_id = NULL, started_at = NULL, heartbeat_at = NULL
WHERE id IN (
    SELECT id FROM submissions
    WHERE status = 'running' AND heartbeat_at < coalesce($3::timestamptz, now()) - $1::interval
    ORDER BY id
    FOR UPDATE
) AND status = 'running' AND heartbeat_at < coalesce($3::timestamptz, now()) - $1::interval
RETURNING id, attempt, status;

-- name: gradings_error_if_pending_expired
UPDATE submissions
SET status = 'error', finished_at = coalesce($2::timestamptz, now()),
    error = 'waited in the queue longer than ' || $1::interval::text || ' without a free slot'
WHERE status = 'pending' AND created_at < coalesce($2::timestamptz, now()) - $1::interval
RETURNING id;

-- name: worker_grading_set_if_held
-- What this worker can grade, on its own row (nothing when another process took the name).
UPDATE workers SET grading_languages = $3::text[], grading_disabled = $4::jsonb
WHERE name = $1::text AND worker_id = $2::text
RETURNING name;

-- name: graders_live
-- What the live workers can grade, and why not.
SELECT name, grading_languages, grading_disabled FROM workers
WHERE heartbeat_at > coalesce($2::timestamptz, now()) - $1::interval
ORDER BY name;

-- name: submissions_stats_of_missions
-- Per mission: submissions judged (passed or failed), passed ones, and the median time from the
-- instance's serve to a passing submission (how long a candidate takes to solve it). An error
-- judged no fix (the sandbox failed, the run proved nothing): it counts for no pass rate.
SELECT mission_id, count(*) AS count, count(*) FILTER (WHERE status = 'passed') AS passed,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY extract(epoch FROM created_at - instance_created_at)
       ) FILTER (WHERE status = 'passed') AS median_duration_s
FROM submissions
WHERE mission_id = ANY($1::bigint[]) AND status IN ('passed', 'failed')
GROUP BY mission_id;

-- name: submissions_stats_of_variants
-- Per variant of mission $1, as submissions_stats_of_missions is per mission: the variant
-- is the one the submission's instance was served.
SELECT i.variant_id, count(*) AS count, count(*) FILTER (WHERE s.status = 'passed') AS passed,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY extract(epoch FROM s.created_at - s.instance_created_at)
       ) FILTER (WHERE s.status = 'passed') AS median_duration_s
FROM submissions s
JOIN mission_instances i ON i.id = s.instance_id
WHERE s.mission_id = $1 AND s.status IN ('passed', 'failed')
GROUP BY i.variant_id;

-- name: grading_signals_by_domain
-- For /metrics, per domain: submissions judged (passed or failed), those that passed, and the
-- errors (which judged no fix), ever, from the totals the grading's end keeps.
SELECT domain,
       coalesce(sum(submissions) FILTER (WHERE status IN ('passed', 'failed')), 0)::bigint
           AS graded,
       coalesce(sum(submissions) FILTER (WHERE status = 'passed'), 0)::bigint AS passed,
       coalesce(sum(submissions) FILTER (WHERE status = 'error'), 0)::bigint AS errored
FROM submission_totals
GROUP BY domain;

-- name: grading_pass_times_by_domain
-- For /metrics, per domain and bucket: the passing submissions and their times' sum, ever,
-- from the buckets each pass keeps (migration 0027).
SELECT domain, le, sum(submissions)::bigint AS submissions, sum(seconds) AS seconds
FROM submission_pass_times
GROUP BY domain, le;

-- name: gradings_in_flight
-- For /metrics: pending and running submissions, from their partial indexes only.
SELECT (SELECT count(*) FROM submissions WHERE status = 'pending') AS pending,
       (SELECT count(*) FROM submissions WHERE status = 'running') AS running;

-- name: submissions_of_mission
-- For reviewers: a mission's latest submissions with the candidate's files and the code that
-- was served (the instance's), to show the fix as a diff.
SELECT s.id, s.instance_id, s.user_id, s.status, s.created_at, s.visible_passed,
       s.visible_total, s.hidden_passed, s.hidden_total, s.error, s.files, i.files AS served
FROM submissions s
JOIN mission_instances i ON i.id = s.instance_id
WHERE s.mission_id = $1::bigint
ORDER BY s.created_at DESC, s.id DESC
LIMIT $2::int;
