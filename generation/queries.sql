-- Queries of the generation queue (generation_jobs) and the spend ledger (llm_calls).
-- Every state change is conditional on the expected status, and, once a job has been
-- claimed, on its attempt (the fencing token): zero rows means another actor won.
-- $n::timestamptz "now" parameters are null in production and set by tests to move time.


-- name: user_lock
-- Serializes enqueues for one user, so counting their active jobs and inserting one is atomic.
-- advisory lock: user (core/locks.py)
SELECT pg_advisory_xact_lock(2, hashtext($1::text));

-- name: job_insert_within_limits
-- One statement: count the user's active jobs and read the pending depth, and insert only
-- when both are under their limits. The per-user count is exact because the caller holds
-- user_lock; the depth is a soft limit that concurrent enqueues may overshoot by at most
-- their number. The depth comes from its shards (migration 0012), a few rows however deep the
-- queue: counting the pending jobs would make every enqueue slower as the queue grows.
WITH active AS (
    SELECT count(*) AS jobs FROM generation_jobs
    WHERE user_id = $2::text AND status IN ('pending', 'generating', 'awaiting_review')
),
depth AS (
    SELECT coalesce(sum(interactive + replenish), 0)::bigint AS pending,
           coalesce(sum(replenish), 0)::bigint AS replenish_pending
    FROM generation_queue_depth
),
previous_turn AS (
    SELECT max(fair_time) AS fair_time FROM generation_jobs
    WHERE user_id = $2::text AND status = 'pending'
),
inserted AS (
    INSERT INTO generation_jobs
        (lane, user_id, track, domain, created_at, fair_time, created_by, cohort, variant_of,
         rendering_of)
    SELECT $1::text, $2::text, $3::text, $4::text, coalesce($8::timestamptz, now()),
           greatest(coalesce($8::timestamptz, now()), previous_turn.fair_time + $7::interval),
           $10::bigint, $11::text, $12::bigint, $13::bigint
    FROM active, depth, previous_turn
    -- The replenish lane has its own, smaller depth limit: it is what gets shed first.
    WHERE active.jobs < $5::int AND depth.pending < $6::int
      AND ($1::text = 'interactive' OR depth.replenish_pending < $9::int)
    RETURNING id
)
SELECT (SELECT id FROM inserted) AS job_id, active.jobs AS active_jobs, depth.pending
FROM active, depth;

-- name: job_active_interactive_of_user_track
-- The user's interactive job for this track that is still under way, if any; exact when the
-- caller holds user_lock, as no other enqueue for the user can commit meanwhile.
SELECT id FROM generation_jobs
WHERE user_id = $1::text AND track = $2::text AND lane = 'interactive'
  AND status IN ('pending', 'generating', 'awaiting_review')
ORDER BY id
LIMIT 1;

-- name: dispatchers_wake
-- Sent after the enqueue has committed, in a transaction of its own that writes nothing:
-- a NOTIFY inside the enqueue would hold Postgres's cluster-wide notify lock across that
-- transaction's commit flush, and serialize every enqueue behind the disk.
SELECT pg_notify('warmpool_jobs', '');

-- name: job_target
-- What a job makes: a new mission (both null), another bug in mission variant_of, or
-- renderings of variant rendering_of.
SELECT variant_of, rendering_of FROM generation_jobs WHERE id = $1::bigint;

-- name: job_cancel_if_pending
UPDATE generation_jobs SET status = 'cancelled', finished_at = now()
WHERE id = $1::bigint AND status = 'pending'
RETURNING id;

-- name: job_view
-- A job as the API shows it: its queue position follows the dispatch order of
-- job_claim_within_cap (interactive lane first, then fair_time, then id), among the jobs a
-- claim may take (not those waiting for a batch, which have none), and its spend sums the
-- ledger. With $2, only a job that key made.
SELECT j.id, j.status, j.lane, j.user_id, j.track, j.domain, j.attempt, j.created_at,
       j.started_at, j.finished_at, j.error, j.mission_id, j.instance_id, j.created_by,
       j.waiting_for_call,
       CASE WHEN j.status = 'pending' AND j.waiting_for_call IS NULL THEN (
           SELECT count(*) FROM generation_jobs p
           WHERE p.status = 'pending' AND p.waiting_for_call IS NULL
             AND ((p.lane = 'interactive' AND j.lane = 'replenish')
                  OR (p.lane = j.lane AND (p.fair_time, p.id) < (j.fair_time, j.id)))
       ) END AS queue_position,
       spend.llm_calls, spend.input_tokens, spend.output_tokens, spend.cost_usd,
       spend.resumed_calls, spend.saved_usd
FROM generation_jobs j
CROSS JOIN LATERAL (
    SELECT count(*) AS llm_calls,
           coalesce(sum(input_tokens), 0) AS input_tokens,
           coalesce(sum(output_tokens), 0) AS output_tokens,
           coalesce(sum(cost_usd), 0) AS cost_usd,
           coalesce(sum(resumed), 0) AS resumed_calls,
           coalesce(sum(resumed * cost_usd), 0) AS saved_usd
    FROM llm_calls WHERE job_id = j.id
) spend
WHERE j.id = $1::bigint AND ($2::bigint IS NULL OR j.created_by = $2::bigint);

-- name: job_claim_within_cap
-- One round trip: the function (migrations 0007 and 0009, and the claim by domain) takes the
-- dispatch lock (advisory lock: dispatch, core/locks.py), counts what is in flight and claims
-- what fits under the global cap, the lanes' shares and the budget, among the jobs of the
-- domains this worker can make ($9; NULL: every domain). How the cap holds when several
-- workers claim at the same moment: each claim takes that transaction lock first, so the count
-- cannot go stale between the count and the claim; in READ COMMITTED (which the function
-- insists on) each of its statements takes a snapshot of its own, the claim's after the lock
-- is granted, so it sees every claim that committed before. SKIP LOCKED passes over rows a
-- cancel or the sweeper holds; the status check in the UPDATE makes the claim conditional.
SELECT * FROM generation_claim_within_cap(
    $1::int, $2::int, $3::int, $4::text, $5::timestamptz, $6::numeric, $7::numeric, $8::numeric,
    $9::text[]
);

-- name: jobs_heartbeat_if_generating
-- Returns the jobs this worker still holds; a job missing from the answer was lost (swept).
UPDATE generation_jobs j SET heartbeat_at = coalesce($3::timestamptz, now())
FROM unnest($1::bigint[], $2::int[]) AS held(id, attempt)
WHERE j.id = held.id AND j.attempt = held.attempt AND j.status = 'generating'
RETURNING j.id;

-- name: jobs_lock_under_attempt
-- Opens the final transaction of a batch of jobs: while it holds these rows the sweeper
-- cannot fail them. Each job comes back with its status under that attempt: generating (still
-- this attempt's to end), or whatever the sweeper or an earlier try of this transaction made it.
SELECT j.id, j.status FROM generation_jobs j
JOIN unnest($1::bigint[], $2::int[]) AS held(id, attempt)
  ON j.id = held.id AND j.attempt = held.attempt
ORDER BY j.id
FOR UPDATE OF j;

-- name: jobs_finish_if_generating
-- The final transition of a batch, each row conditional on its job still generating under
-- its attempt. awaiting_review is not finished: the job completes when its mission is reviewed.
UPDATE generation_jobs j
SET status = done.status, error = done.error, mission_id = done.mission_id,
    instance_id = done.instance_id,
    finished_at = CASE WHEN done.status = 'awaiting_review' THEN NULL ELSE now() END
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
    AS done(id, attempt, status, error, mission_id, instance_id)
WHERE j.id = done.id AND j.attempt = done.attempt AND j.status = 'generating'
RETURNING j.id;

-- name: sweep_moment
-- The one moment a sweep (or a reconcile) judges every job by. Each of its statements reading
-- now() of its own would let a job go stale between the requeue and the failing: the failing
-- statement would then fail a job whose model call the requeue should have taken over.
SELECT now();

-- name: jobs_requeue_if_stale_with_open_call
-- Before the sweeper fails them: a job whose worker stopped heartbeating (not one past the hard
-- limit) that has a model call the provider may still hold, open or answered, goes back to the
-- queue under a new attempt, which takes the call over instead of paying for it again; at most
-- until its attempt reaches $4, so a job that kills every worker ends failed. A claim after a
-- batch answered the job's call spent an attempt without any death: not counted. Locked in id
-- order, as jobs_fail_if_stale does.
UPDATE generation_jobs
SET status = 'pending', attempt = attempt + 1, worker_id = NULL, started_at = NULL,
    heartbeat_at = NULL
WHERE id IN (
    SELECT j.id FROM generation_jobs j
    WHERE j.status = 'generating'
      AND j.heartbeat_at < coalesce($3::timestamptz, now()) - $1::interval
      AND j.started_at >= coalesce($3::timestamptz, now()) - $2::interval
      AND j.attempt - (SELECT count(*) FROM llm_calls b
                       WHERE b.job_id = j.id AND b.mode = 'batch') < $4::int
      AND EXISTS (
          SELECT 1 FROM llm_calls c
          WHERE c.job_id = j.id AND c.provider_id IS NOT NULL AND c.dropped_at IS NULL
            AND c.outcome IN ('started', 'ok')
      )
    ORDER BY j.id
    FOR UPDATE
) AND status = 'generating'
RETURNING id, attempt;

-- name: jobs_fail_if_stale
-- The sweeper: a generating job whose worker stopped heartbeating, or that has run past the
-- hard limit. Conditional on status, so a completion that commits first wins; rows are
-- locked in id order, as the final transaction locks them, so the two never deadlock.
UPDATE generation_jobs
SET status = 'failed', finished_at = coalesce($3::timestamptz, now()),
    error = CASE
        WHEN started_at < coalesce($3::timestamptz, now()) - $2::interval
            THEN 'generation ran longer than ' || $2::interval::text || ' and was stopped'
        ELSE 'worker ' || worker_id || ' stopped heartbeating for more than '
             || $1::interval::text || ' (it probably died)'
    END
WHERE id IN (
    SELECT id FROM generation_jobs
    WHERE status = 'generating'
      AND (heartbeat_at < coalesce($3::timestamptz, now()) - $1::interval
           OR started_at < coalesce($3::timestamptz, now()) - $2::interval)
    ORDER BY id
    FOR UPDATE
) AND status = 'generating'
RETURNING id, attempt, worker_id, error;

-- name: jobs_fail_if_pending_expired
-- Not a job that waits for a batch: the batch's own window bounds that wait, and a line it
-- leaves unanswered is retried or fails the job.
UPDATE generation_jobs
SET status = 'failed', finished_at = coalesce($2::timestamptz, now()),
    error = 'waited in the queue longer than ' || $1::interval::text || ' without a free slot'
WHERE status = 'pending' AND waiting_for_call IS NULL
  AND created_at < coalesce($2::timestamptz, now()) - $1::interval
RETURNING id;

-- name: jobs_requeue_if_owned_by_dead_process_with_open_call
-- Before reconcile fails them: a dead process's job (as jobs_fail_if_owned_by_dead_process
-- finds them) with a model call the provider may still hold goes back to the queue under a new
-- attempt, which takes the call over; at most until its attempt reaches $4, not counting the
-- claims after a batch answered one of its calls (as jobs_requeue_if_stale_with_open_call).
UPDATE generation_jobs j
SET status = 'pending', attempt = j.attempt + 1, worker_id = NULL, started_at = NULL,
    heartbeat_at = NULL
WHERE j.status = 'generating' AND j.worker_id = ANY($1::text[])
  AND j.heartbeat_at < coalesce($3::timestamptz, now()) - $2::interval
  AND j.attempt - (SELECT count(*) FROM llm_calls b
                   WHERE b.job_id = j.id AND b.mode = 'batch') < $4::int
  AND EXISTS (
      SELECT 1 FROM llm_calls c
      WHERE c.job_id = j.id AND c.provider_id IS NOT NULL AND c.dropped_at IS NULL
        AND c.outcome IN ('started', 'ok')
  )
RETURNING j.id, j.attempt;

-- name: jobs_fail_if_owned_by_dead_process
-- Jobs that a previous process of this worker held when it died: the caller names the exact
-- identities it found dead, and a heartbeat still fresh means a live process after all (a
-- reused pid, a machine name shared by mistake), so that job is not this caller's to fail.
UPDATE generation_jobs
SET status = 'failed', finished_at = coalesce($3::timestamptz, now()),
    error = 'worker ' || worker_id || ' died mid-generation and was restarted'
WHERE status = 'generating' AND worker_id = ANY($1::text[])
  AND heartbeat_at < coalesce($3::timestamptz, now()) - $2::interval
RETURNING id, attempt, worker_id;

-- name: jobs_release_if_generating
-- At shutdown, once the grace is over: the generations a worker still runs go back to the
-- queue under a new attempt, which fences off whatever the stopped generation still writes
-- (its model call under way is recorded, as orphaned). The job keeps its place in line
-- (fair_time) and its ledger rows.
UPDATE generation_jobs j
SET status = 'pending', attempt = j.attempt + 1, worker_id = NULL, started_at = NULL,
    heartbeat_at = NULL
FROM unnest($1::bigint[], $2::int[]) AS held(id, attempt)
WHERE j.id = held.id AND j.attempt = held.attempt AND j.status = 'generating'
RETURNING j.id, j.attempt;

-- name: jobs_release_if_not_held
-- Jobs generating under this worker's identity that it does not run: a claim whose answer
-- never reached it (a timeout, a broken connection) committed them all the same. The caller
-- runs this between its own claims, never beside one, so no claim of its own is in flight.
UPDATE generation_jobs
SET status = 'pending', attempt = attempt + 1, worker_id = NULL, started_at = NULL,
    heartbeat_at = NULL
WHERE status = 'generating' AND worker_id = $1::text AND NOT (id = ANY($2::bigint[]))
RETURNING id, attempt;

-- name: worker_ids_generating
-- Who holds the jobs in flight (at most the global cap of rows): the caller matches each
-- identity exactly, never by pattern.
SELECT DISTINCT worker_id FROM generation_jobs WHERE status = 'generating';

-- name: batch_lines_delete_ended_before
-- Retention: the lines whose batch ended before $1, once their calls are settled and their
-- jobs have ended (or are gone): their requests and answers are read by nobody any more, and
-- the ledger keeps each call's row with its custom id. Oldest first, by primary key, in small
-- batches, as jobs_delete_finished_before.
DELETE FROM llm_batch_lines
WHERE call_id = ANY(ARRAY(
    SELECT l.call_id FROM llm_batch_lines l
    LEFT JOIN generation_jobs j ON j.id = l.job_id
    WHERE l.ended_at < $1::timestamptz
      AND (j.id IS NULL OR j.status IN ('completed', 'failed', 'cancelled', 'awaiting_review'))
      AND EXISTS (SELECT 1 FROM llm_calls c WHERE c.id = l.call_id AND c.finished_at IS NOT NULL)
    ORDER BY l.ended_at
    LIMIT $2::int
));

-- name: batches_delete_emptied_before
-- The batches that ended before $1 and whose lines retention has deleted.
DELETE FROM llm_batches b
WHERE b.status = 'ended' AND b.ended_at < $1::timestamptz
  AND NOT EXISTS (SELECT 1 FROM llm_batch_lines l WHERE l.batch_id = b.id);

-- name: jobs_delete_finished_before
-- Retention, in small batches so no long lock or bloat burst. Ledger rows stay. The batch's
-- ids as an array, so each row is deleted by primary key (`id IN (subquery)` is planned as a
-- semi-join that reads the whole table for every batch).
DELETE FROM generation_jobs
WHERE id = ANY(ARRAY(
    SELECT id FROM generation_jobs
    WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < $1::timestamptz
    ORDER BY finished_at
    LIMIT $2::int
));

-- name: llm_call_start_if_generating
-- A model call may start only while its job is still generating under this attempt. The
-- job's row is read under a share lock: a sweep or release of the job that is under way but
-- not yet committed is waited for and then seen, so no call starts for a job being lost. The
-- ledger row is written before the call, so a process that dies mid-call leaves its spend on
-- record; keyed by the call's number within its attempt, so a retry after an answer lost in
-- an outage returns the row the first try wrote (the two branches read one snapshot: exactly
-- one of them answers).
WITH job AS (
    SELECT id, worker_id FROM generation_jobs
    WHERE id = $1::bigint AND attempt = $2::int AND status = 'generating'
    FOR SHARE
),
inserted AS (
    INSERT INTO llm_calls (
        job_id, attempt, call_number, purpose, provider, model, mode, try_number, ceiling_usd,
        worker_id
    )
    SELECT $1::bigint, $2::int, $6::int, $3::text, $4::text, $5::text, $7::text, $8::int,
           $9::numeric, job.worker_id
    FROM job
    ON CONFLICT (job_id, attempt, call_number) DO NOTHING
    RETURNING id
)
SELECT id FROM inserted
UNION ALL
SELECT c.id FROM llm_calls c, job
WHERE c.job_id = $1::bigint AND c.attempt = $2::int AND c.call_number = $6::int;

-- name: llm_call_submitted
-- The provider named the call (a background response's id): stored at once, whatever became
-- of the job meanwhile, since the call is under way and paid for; whoever holds the job next
-- finds it by this id.
UPDATE llm_calls SET provider_id = $2::text
WHERE id = $1::bigint AND finished_at IS NULL
RETURNING id;

-- name: llm_call_batched
-- The call goes out as a line of a batch: the line is written with the request it sends, and
-- the call's row names it by its custom id, in one statement; whoever holds the job next
-- finds the call by it. Written again after an answer lost in an outage, it changes nothing.
WITH line AS (
    INSERT INTO llm_batch_lines (call_id, custom_id, job_id, model, request)
    VALUES ($1::bigint, $2::text, $3::bigint, $4::text, $5::jsonb)
    ON CONFLICT (call_id) DO NOTHING
)
UPDATE llm_calls SET provider_id = $2::text
WHERE id = $1::bigint AND finished_at IS NULL
RETURNING id;

-- name: batch_line_of_call
-- A call's batch line as its batch left it, with the count of the lines of the same job,
-- purpose and try that failed (each is a try of that call).
SELECT l.status, l.answer, l.error, l.retryable,
       (SELECT count(*) FROM llm_batch_lines f
        JOIN llm_calls fc ON fc.id = f.call_id
        WHERE f.job_id = l.job_id AND f.status = 'failed'
          AND fc.purpose = c.purpose AND fc.try_number = c.try_number) AS failures
FROM llm_batch_lines l
JOIN llm_calls c ON c.id = l.call_id
WHERE l.call_id = $1::bigint;

-- name: job_wait_for_call_if_generating
-- The job's model call went out as a line of a batch: the job leaves its slot and goes back
-- to the queue, pending but waiting for that call, so that no claim takes it until the line
-- has ended; its reservation still counts against the budget. The attempt stays: the next
-- claim counts one, and that attempt takes the call over. A line that ended meanwhile is
-- caught by the next batch pass's wake-up (jobs_wake_if_line_ended).
UPDATE generation_jobs
SET status = 'pending', waiting_for_call = $3::bigint, worker_id = NULL, started_at = NULL,
    heartbeat_at = NULL
WHERE id = $1::bigint AND attempt = $2::int AND status = 'generating'
RETURNING id;

-- name: llm_call_take_over_if_generating
-- An earlier attempt's call of this purpose and try that the provider may still hold (open,
-- or settled with a usable answer, which reading again costs nothing): this attempt takes it
-- over, only while the job is generating under it (share lock, as llm_call_start_if_generating).
-- The latest such call wins: one the provider dropped was settled as failed and paid again.
-- A retry after an answer lost in an outage finds the row already taken by this attempt and
-- counts no second takeover (both branches read one snapshot: at most one of them answers).
WITH job AS (
    SELECT id FROM generation_jobs
    WHERE id = $1::bigint AND attempt = $2::int AND status = 'generating'
    FOR SHARE
),
candidate AS (
    SELECT c.id FROM llm_calls c, job
    WHERE c.job_id = $1::bigint AND c.attempt < $2::int AND c.purpose = $3::text
      AND c.try_number = $4::int AND c.provider_id IS NOT NULL AND c.dropped_at IS NULL
      AND c.outcome IN ('started', 'ok')
    ORDER BY c.id DESC
    LIMIT 1
    FOR UPDATE OF c
),
taken AS (
    -- A batch call is always taken over by an attempt after the one that wrote it: that is how
    -- its answer is read, not a call saved, so it counts no takeover.
    UPDATE llm_calls c
    SET resumed_by_attempt = $2::int,
        resumed = c.resumed + CASE WHEN c.mode = 'batch' THEN 0 ELSE 1 END
    FROM candidate
    WHERE c.id = candidate.id AND coalesce(c.resumed_by_attempt, c.attempt) < $2::int
    RETURNING c.id, c.provider_id, c.outcome, c.started_at, c.mode
)
SELECT id, provider_id, outcome, started_at, mode FROM taken
UNION ALL
SELECT c.id, c.provider_id, c.outcome, c.started_at, c.mode FROM llm_calls c, candidate
WHERE c.id = candidate.id AND c.resumed_by_attempt = $2::int;

-- name: llm_call_being_named
-- An earlier attempt's background call of this purpose and try that has no provider's id yet
-- while the process that made it still lives (its worker's heartbeat within $5, a process
-- started before the call: not a successor that reuses its pid): a generation given back at a
-- deploy while its response was being created stores the id once the provider names it, for
-- this attempt to take the call over, while this attempt holds the job. A dead process's call
-- is not waited for.
SELECT EXISTS (
    SELECT 1 FROM llm_calls c
    JOIN workers w ON w.worker_id = c.worker_id
    JOIN generation_jobs j ON j.id = c.job_id
    WHERE c.job_id = $1::bigint AND c.attempt < $2::int AND c.purpose = $3::text
      AND c.try_number = $4::int AND c.mode = 'background'
      AND c.provider_id IS NULL AND c.finished_at IS NULL
      AND w.heartbeat_at > now() - $5::interval AND w.started_at <= c.started_at
      AND j.attempt = $2::int AND j.status = 'generating'
);

-- name: llm_call_finish
-- Always recorded, even when the job was lost meanwhile: then it is marked orphaned.
UPDATE llm_calls c
SET finished_at = now(), input_tokens = $2::int, output_tokens = $3::int,
    cost_usd = $4::numeric, outcome = $5::text, error = $6::text,
    orphaned = NOT EXISTS (
        SELECT 1 FROM generation_jobs j
        WHERE j.id = c.job_id AND j.attempt = c.attempt AND j.status = 'generating'
    )
WHERE c.id = $1::bigint
RETURNING orphaned;

-- name: llm_call_settle_if_held
-- A call with a provider id is settled once, by the attempt that holds it, while that attempt
-- still holds the job: an older attempt that wakes up finds the row taken over (or its job
-- gone) and writes nothing, leaving the call to whoever holds the job now.
UPDATE llm_calls c
SET finished_at = now(), input_tokens = $2::int, output_tokens = $3::int,
    cost_usd = $4::numeric, outcome = $5::text, error = $6::text
WHERE c.id = $1::bigint AND c.finished_at IS NULL
  AND coalesce(c.resumed_by_attempt, c.attempt) = $7::int
  AND EXISTS (
      SELECT 1 FROM generation_jobs j
      WHERE j.id = c.job_id AND j.attempt = $7::int AND j.status = 'generating'
  )
RETURNING id;

-- name: llm_call_dropped_if_held
-- A call taken over that the provider no longer holds: it saved nothing, so its takeover is
-- not counted. Still open, it is settled as lost: failed, at its ceiling ($3), as a call whose
-- answer never came. Once per call (dropped_at), so a retry after an outage changes nothing.
UPDATE llm_calls c
SET dropped_at = now(), resumed = c.resumed - 1,
    finished_at = coalesce(c.finished_at, now()),
    outcome = CASE WHEN c.finished_at IS NULL THEN 'failed' ELSE c.outcome END,
    cost_usd = CASE WHEN c.finished_at IS NULL THEN $3::numeric ELSE c.cost_usd END,
    error = CASE WHEN c.finished_at IS NULL THEN $4::text ELSE c.error END
WHERE c.id = $1::bigint AND c.resumed_by_attempt = $2::int AND c.dropped_at IS NULL
RETURNING id;

-- name: llm_calls_open_of_abandoned_jobs
-- Calls still under way at the provider that their job will never use: it has ended (or was
-- deleted), or, while the budget stops every claim ($1), it waits in the queue; not a batch
-- call then, whose answer is kept in its line at no cost and whose job's reservation holds.
-- Nor a batch call whose batch is under way: a line cannot be cancelled alone, and such calls
-- would take the pass's places until their batches end. From the partial index of open calls:
-- a handful of rows.
SELECT c.id, c.provider_id, c.mode, c.job_id, j.attempt AS job_attempt
FROM llm_calls c
LEFT JOIN generation_jobs j ON j.id = c.job_id
WHERE c.provider_id IS NOT NULL AND c.finished_at IS NULL
  AND (j.id IS NULL OR j.status IN ('completed', 'failed', 'cancelled', 'awaiting_review')
       OR (j.status = 'pending' AND $1::boolean AND c.mode <> 'batch'))
  AND NOT EXISTS (
      SELECT 1 FROM llm_batch_lines l WHERE l.call_id = c.id AND l.status = 'batched'
  )
ORDER BY c.id
LIMIT $2::int;

-- name: llm_calls_book_cut_off
-- Calls cut off before the provider named them: their process died while the request was out
-- (started $4 seconds before the moment $2, or the database's now: longer ago than a stopped
-- generation waits for its request to store the id), and their attempt no longer holds the
-- job. The provider may have
-- billed them and nobody can find them there again, so each is booked once, at its ceiling
-- (a row of an older release has none: $3, this provider's), as failed and orphaned. Not a
-- batch call, whose line goes out only with its name. From the partial index of open calls
-- without a name.
UPDATE llm_calls c
SET finished_at = now(), outcome = 'failed', cost_usd = coalesce(c.ceiling_usd, $3::numeric),
    error = 'cut off before the provider named it: booked at its ceiling', orphaned = true
WHERE c.id = ANY(ARRAY(
    SELECT o.id FROM llm_calls o
    WHERE o.provider_id IS NULL AND o.finished_at IS NULL
      AND o.started_at < coalesce($2::timestamptz, now()) - $4::float8 * interval '1 second'
      AND o.mode <> 'batch'
      AND NOT EXISTS (
          SELECT 1 FROM generation_jobs j
          WHERE j.id = o.job_id AND j.attempt = o.attempt AND j.status = 'generating'
      )
    ORDER BY o.started_at
    LIMIT $1::int
))
  AND c.provider_id IS NULL AND c.finished_at IS NULL
RETURNING c.id, c.job_id, c.cost_usd;

-- name: llm_call_settle_if_abandoned
-- Settles a call cancelled at the provider, unless its job was claimed meanwhile (generating,
-- or claimed and given back, under another attempt than $7): then its attempt took the call
-- over, found it cancelled, and books it itself.
UPDATE llm_calls c
SET finished_at = now(), input_tokens = $2::int, output_tokens = $3::int,
    cost_usd = $4::numeric, outcome = $5::text, error = $6::text, orphaned = true
WHERE c.id = $1::bigint AND c.finished_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM generation_jobs j
      WHERE j.id = c.job_id AND (j.status = 'generating' OR j.attempt <> $7::int)
  )
RETURNING id;

-- name: queue_stats
-- Per lane: pending and generating counts and the oldest pending job's age, from the partial
-- indexes only.
SELECT lanes.lane,
       (SELECT count(*) FROM generation_jobs WHERE status = 'pending' AND lane = lanes.lane) AS pending,
       (SELECT count(*) FROM generation_jobs WHERE status = 'generating' AND lane = lanes.lane) AS generating,
       (SELECT extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at))
        FROM generation_jobs WHERE status = 'pending' AND lane = lanes.lane) AS oldest_pending_age_s
FROM (VALUES ('interactive'), ('replenish')) AS lanes(lane);

-- name: jobs_listed
-- A page of jobs for the jobs page, newest first: those of the statuses $1 on the lanes $2 in
-- the domains $3, of the user $6 (NULL: every user), created before job $4 (NULL: from the
-- newest), at most $5, each with its model calls and their cost. The pending and generating
-- jobs are a few hundred rows, read through the queue's partial indexes. The others: without
-- a user, one read of generation_jobs_listed backwards per status, lane and domain, each of at
-- most $5 entries, then the newest $5 of those: one scan in time order would read the whole
-- history where the filters match few jobs (a domain that no worker can make has none); with
-- a user, generation_jobs_of_user. Each branch repeats the status list of its index's
-- predicate, which the planner must see to use a partial index. The groups are the caller's
-- arrays, whose lengths the planner knows: found in the index itself (a recursive loose scan),
-- their number is estimated at hundreds, and the statement is then costed high enough to be
-- JIT-compiled, which takes longer than the page's reads by a hundred times.
WITH groups AS (
    SELECT s.status, l.lane, d.domain
    FROM unnest($1::text[]) AS s(status), unnest($2::text[]) AS l(lane),
         unnest($3::text[]) AS d(domain)
    WHERE $6::text IS NULL AND s.status IN ('awaiting_review', 'completed', 'failed', 'cancelled')
),
-- Where the page starts; a job deleted since (retention) had nothing older left either.
cursor AS (
    SELECT coalesce(
               (SELECT created_at FROM generation_jobs WHERE id = $4::bigint),
               CASE WHEN $4::bigint IS NULL THEN 'infinity' ELSE '-infinity' END::timestamptz
           ) AS created_at,
           coalesce($4::bigint, 0) AS id
),
page AS (
    SELECT j.* FROM generation_jobs j, cursor c
    WHERE j.status IN ('pending', 'generating') AND j.status = ANY($1::text[])
      AND j.lane = ANY($2::text[]) AND j.domain = ANY($3::text[])
      AND ($6::text IS NULL OR j.user_id = $6::text)
      AND (j.created_at, j.id) < (c.created_at, c.id)
    UNION ALL
    SELECT p.* FROM groups g, cursor c
    CROSS JOIN LATERAL (
        SELECT * FROM generation_jobs j
        WHERE j.status IN ('awaiting_review', 'completed', 'failed', 'cancelled')
          AND j.status = g.status AND j.lane = g.lane AND j.domain = g.domain
          AND (j.created_at, j.id) < (c.created_at, c.id)
        ORDER BY j.created_at DESC, j.id DESC
        LIMIT $5::int
    ) p
    UNION ALL
    (SELECT j.* FROM generation_jobs j, cursor c
     WHERE j.user_id = $6::text
       AND j.status IN ('awaiting_review', 'completed', 'failed', 'cancelled')
       AND j.status = ANY($1::text[]) AND j.lane = ANY($2::text[])
       AND j.domain = ANY($3::text[]) AND (j.created_at, j.id) < (c.created_at, c.id)
     ORDER BY j.created_at DESC, j.id DESC
     LIMIT $5::int)
)
SELECT j.id, j.status, j.lane, j.user_id, j.track, j.domain, j.attempt, j.worker_id,
       j.created_at, j.started_at, j.heartbeat_at, j.finished_at, j.error, j.mission_id,
       j.instance_id, j.waiting_for_call, spend.llm_calls, spend.cost_usd
FROM (SELECT * FROM page ORDER BY created_at DESC, id DESC LIMIT $5::int) j
CROSS JOIN LATERAL (
    SELECT count(*) AS llm_calls, coalesce(sum(cost_usd), 0) AS cost_usd
    FROM llm_calls WHERE job_id = j.id
) spend
ORDER BY j.created_at DESC, j.id DESC;

-- name: jobs_at_a_glance_by_domain
-- Per domain of $1 and lane: the jobs pending and generating (a few hundred live rows at
-- most) and the newest failure, one probe of generation_jobs_listed.
SELECT d.domain, l.lane,
       (SELECT count(*) FROM generation_jobs
        WHERE status = 'pending' AND lane = l.lane AND domain = d.domain) AS pending,
       (SELECT count(*) FROM generation_jobs
        WHERE status = 'generating' AND lane = l.lane AND domain = d.domain) AS generating,
       failure.id AS failed_job_id, failure.finished_at AS failed_at, failure.error AS failure
FROM unnest($1::text[]) AS d(domain)
CROSS JOIN (VALUES ('interactive'), ('replenish')) AS l(lane)
LEFT JOIN LATERAL (
    SELECT id, finished_at, error FROM generation_jobs
    WHERE status = 'failed' AND lane = l.lane AND domain = d.domain
    ORDER BY created_at DESC, id DESC
    LIMIT 1
) failure ON true
ORDER BY d.domain, l.lane;

-- name: jobs_awaiting_review_of_mission
-- The interactive jobs whose users wait on this mission's review, locked for settling.
SELECT id FROM generation_jobs
WHERE mission_id = $1::bigint AND status = 'awaiting_review'
ORDER BY id
FOR UPDATE;

-- name: job_complete_if_awaiting_review
UPDATE generation_jobs SET status = 'completed', instance_id = $2::bigint, finished_at = now()
WHERE id = $1::bigint AND status = 'awaiting_review'
RETURNING id;

-- name: jobs_fail_if_awaiting_review_of_mission
UPDATE generation_jobs SET status = 'failed', error = $2::text, finished_at = now()
WHERE mission_id = $1::bigint AND status = 'awaiting_review'
RETURNING id;

-- name: jobs_by_domain
-- Per domain, what replenishment counts: pending and generating jobs of both lanes that write
-- missions, and the variant jobs and rendering jobs under way (each plants a bug in a mission,
-- or renders a variant, that exists); how the mission generations created in [$2, $3] ended (a
-- mission, or a failure before one: a job failed by its mission's rejection names the mission,
-- and counts as a review outcome instead); and the domain's last replenish job, whose id names
-- the state a replenishment pass saw. Retention bounds the rows scanned.
SELECT d.domain,
       count(j.id) FILTER (WHERE j.status = 'pending' AND j.variant_of IS NULL
                             AND j.rendering_of IS NULL) AS pending,
       count(j.id) FILTER (WHERE j.status = 'generating' AND j.variant_of IS NULL
                             AND j.rendering_of IS NULL) AS generating,
       count(j.id) FILTER (WHERE j.mission_id IS NOT NULL AND j.variant_of IS NULL
                             AND j.rendering_of IS NULL
                             AND j.created_at >= $2::timestamptz
                             AND j.created_at <= $3::timestamptz) AS generated,
       count(j.id) FILTER (WHERE j.status = 'failed' AND j.mission_id IS NULL
                             AND j.variant_of IS NULL AND j.rendering_of IS NULL
                             AND j.created_at >= $2::timestamptz
                             AND j.created_at <= $3::timestamptz) AS failed,
       count(j.id) FILTER (WHERE j.status IN ('pending', 'generating')
                             AND j.variant_of IS NOT NULL) AS variant_jobs,
       count(j.id) FILTER (WHERE j.status IN ('pending', 'generating')
                             AND j.rendering_of IS NOT NULL) AS rendering_jobs,
       max(j.id) FILTER (WHERE j.lane = 'replenish') AS last_replenish_job_id
FROM unnest($1::text[]) AS d(domain)
LEFT JOIN generation_jobs j ON j.domain = d.domain
GROUP BY d.domain;

-- name: budget_today
SELECT spent_usd, reserved_usd FROM generation_budget_committed(coalesce($1::timestamptz, now()));

-- name: llm_spend_by_outcome_and_mode
-- The whole ledger per outcome ('started': under way, or its process died mid-call), from the
-- totals that the ledger's triggers keep: a few rows, however long the ledger grows.
SELECT outcome, mode, sum(llm_calls)::bigint AS llm_calls,
       sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens,
       sum(cost_usd) AS cost_usd, sum(resumed_calls)::bigint AS resumed_calls,
       sum(saved_usd) AS saved_usd
FROM llm_spend_totals
GROUP BY outcome, mode;

-- name: llm_spend_by_domain
-- Each domain's model calls and their cost, from the totals that the ledger's triggers keep per
-- domain (migration 0029); a domain nothing was spent on is there with 0.
SELECT d.domain, coalesce(sum(t.llm_calls), 0)::bigint AS llm_calls,
       coalesce(sum(t.cost_usd), 0) AS cost_usd
FROM unnest($1::text[]) AS d(domain)
LEFT JOIN llm_spend_by_domain t ON t.domain = d.domain
GROUP BY d.domain;

-- name: llm_spend_of_batches_by_model
-- The calls that went through a batch, per model, from the per-day totals that the ledger's
-- triggers keep (a few rows a day): what batching saved is priced per model.
SELECT model, sum(llm_calls)::bigint AS llm_calls, sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens, sum(cost_usd) AS cost_usd,
       sum(resumed_calls)::bigint AS resumed_calls, sum(saved_usd) AS saved_usd
FROM llm_spend_daily
WHERE mode = 'batch'
GROUP BY model;

-- name: llm_spend_by_day
-- The ledger per UTC day from $1 to $2, model, purpose, outcome ('started': under way, or
-- its process died mid-call) and mode, from the totals that the ledger's triggers keep per day
-- (migrations 0017 and 0020): a few rows a day, however long the ledger grows. A group whose
-- calls have all moved on (started, then finished) is left out.
SELECT day, model, purpose, outcome, mode, sum(llm_calls)::bigint AS llm_calls,
       sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens,
       sum(cost_usd) AS cost_usd, sum(resumed_calls)::bigint AS resumed_calls,
       sum(saved_usd) AS saved_usd
FROM llm_spend_daily
WHERE day >= $1::date AND day <= $2::date
GROUP BY day, model, purpose, outcome, mode
HAVING sum(llm_calls) <> 0
ORDER BY day DESC, sum(cost_usd) DESC, model, purpose, outcome, mode;

-- name: worker_by_name
SELECT worker_id, heartbeat_at FROM workers WHERE name = $1::text;

-- name: worker_take_name
-- This process takes its worker's name, unless another process holds it and heartbeats: the
-- holder must be the one the caller found dead ($6, a process of this machine that no longer
-- exists) or silent for longer than the heartbeat timeout. Two processes taking a free name at
-- the same moment: the primary key lets one insert, and the other's update then finds the
-- winner's fresh row and takes nothing.
INSERT INTO workers AS w (name, worker_id, started_at, heartbeat_at, slots, domains, disabled)
VALUES ($1::text, $2::text, now(), now(), $3::int, $4::text[], $5::jsonb)
ON CONFLICT (name) DO UPDATE
SET worker_id = excluded.worker_id, started_at = excluded.started_at,
    heartbeat_at = excluded.heartbeat_at, slots = excluded.slots, running = 0,
    domains = excluded.domains, disabled = excluded.disabled
WHERE w.worker_id = $6::text OR w.heartbeat_at < now() - $7::interval
RETURNING worker_id;

-- name: worker_heartbeat_if_held
-- Nothing when another process took the name (this one was silent past the timeout).
UPDATE workers SET heartbeat_at = now(), running = $3::int
WHERE name = $1::text AND worker_id = $2::text
RETURNING name;

-- name: workers_live
-- The workers whose heartbeat is younger than the heartbeat timeout ($1), a stopped one's too
-- until its row lapses. A handful of rows: workers silent for longer than the job retention
-- are deleted (workers_delete_silent_before).
SELECT name, started_at, heartbeat_at, domains, disabled, slots, running
FROM workers
WHERE heartbeat_at > coalesce($2::timestamptz, now()) - $1::interval
ORDER BY name;

-- name: workers_delete_silent_before
-- The rows of workers that stopped long ago (a machine retired, a container replaced under a
-- new host name): nobody takes their names any more.
DELETE FROM workers WHERE heartbeat_at < $1::timestamptz;

-- name: batch_leader_try_lock
-- One batch pass at a time across all processes (submitting, polling, storing answers): a
-- pass that cannot take this transaction lock is skipped, as another process runs one now.
-- advisory lock: batch_leader (core/locks.py)
SELECT pg_try_advisory_xact_lock(8, 0);

-- name: jobs_wake_if_line_ended
-- The jobs waiting for a call whose batch line has ended (answered or failed) may be claimed
-- again, their reservation with them. Every pass runs it, so a job that began waiting after
-- its line had ended is woken too. From the partial index of waiting jobs: a handful of rows.
UPDATE generation_jobs j SET waiting_for_call = NULL
FROM llm_batch_lines l
WHERE j.status = 'pending' AND j.waiting_for_call IS NOT NULL
  AND l.call_id = j.waiting_for_call AND l.status IN ('answered', 'failed')
RETURNING j.id;

-- name: batch_insert_of_due_lines
-- A batch of the queued lines of one model, oldest first, at most $1 of them, once that model
-- has a full batch or its oldest line has waited $2: the lines are taken and the batch's row
-- written in one statement, so a line goes into one batch only. The lines are locked first:
-- a line cancelled meanwhile (its job ended) stays out of every batch.
WITH due AS (
    SELECT model FROM llm_batch_lines
    WHERE status = 'queued'
    GROUP BY model
    HAVING count(*) >= $1::int OR min(created_at) <= coalesce($3::timestamptz, now()) - $2::interval
    ORDER BY min(created_at)
    LIMIT 1
),
chosen AS (
    SELECT l.call_id FROM llm_batch_lines l, due
    WHERE l.status = 'queued' AND l.model = due.model
    ORDER BY l.created_at, l.call_id
    LIMIT $1::int
    FOR UPDATE OF l SKIP LOCKED
),
batch AS (
    INSERT INTO llm_batches (model, lines)
    SELECT due.model, (SELECT count(*) FROM chosen) FROM due
    WHERE EXISTS (SELECT 1 FROM chosen)
    RETURNING id
),
taken AS (
    UPDATE llm_batch_lines l SET status = 'batched', batch_id = batch.id
    FROM batch, chosen
    WHERE l.call_id = chosen.call_id
    RETURNING l.call_id
)
SELECT id FROM batch;

-- name: batches_submitting
-- Batches whose lines are chosen but that the provider may not hold yet: a pass that died
-- before storing the provider's id (or could not reach the provider) finds them here.
SELECT id, model, input_file_id FROM llm_batches
WHERE status = 'submitting'
ORDER BY id;

-- name: batch_lines_of_batch
SELECT custom_id, request FROM llm_batch_lines
WHERE batch_id = $1::bigint
ORDER BY call_id;

-- name: batch_file_uploaded
UPDATE llm_batches SET input_file_id = $2::text WHERE id = $1::bigint AND status = 'submitting';

-- name: batch_submitted_if_submitting
UPDATE llm_batches
SET status = 'submitted', provider_batch_id = $2::text, provider_status = $3::text,
    submitted_at = now()
WHERE id = $1::bigint AND status = 'submitting'
RETURNING id;

-- name: batches_submitted
SELECT id, provider_batch_id FROM llm_batches
WHERE status = 'submitted'
ORDER BY id;

-- name: batch_progress
UPDATE llm_batches
SET provider_status = $2::text, completed_lines = $3::int, failed_lines = $4::int
WHERE id = $1::bigint AND status = 'submitted';

-- name: batch_lines_end_if_batched
-- What the batch did with each of its lines: answered (the response's body) or failed (why,
-- and whether another line may succeed). Only lines still batched: stored once.
UPDATE llm_batch_lines l
SET status = ended.status, answer = ended.answer::jsonb, error = ended.error,
    retryable = ended.retryable, ended_at = now()
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[])
    AS ended(custom_id, status, answer, error, retryable)
WHERE l.batch_id = $1::bigint AND l.custom_id = ended.custom_id AND l.status = 'batched'
RETURNING l.call_id;

-- name: batch_end_unless_ended
UPDATE llm_batches
SET status = 'ended', provider_status = $2::text, completed_lines = $3::int,
    failed_lines = $4::int, error = $5::text, ended_at = now()
WHERE id = $1::bigint AND status <> 'ended'
RETURNING id;

-- name: batch_line_of_custom_id
SELECT l.status, l.answer, l.error FROM llm_batch_lines l
WHERE l.custom_id = $1::text;

-- name: batch_line_cancel_if_queued
-- A line whose job ended before its batch went out: it never goes out.
UPDATE llm_batch_lines
SET status = 'failed', error = $2::text, ended_at = now()
WHERE custom_id = $1::text AND status = 'queued'
RETURNING call_id;

-- name: batches_open
-- The batches not yet ended, for `warmpool status` and the pool's figures: a handful of rows,
-- from their partial index.
SELECT id, model, lines, provider_batch_id, coalesce(provider_status, status) AS status,
       completed_lines, failed_lines, created_at
FROM llm_batches
WHERE status <> 'ended'
ORDER BY id;

-- name: batch_lines_waiting
-- The lines not yet in a batch and the jobs waiting for a line, from their partial indexes.
SELECT (SELECT count(*) FROM llm_batch_lines WHERE status = 'queued') AS queued_lines,
       (SELECT count(*) FROM generation_jobs
        WHERE status = 'pending' AND waiting_for_call IS NOT NULL) AS waiting_jobs;
