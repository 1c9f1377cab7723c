-- The Batch API lane. A replenish job's model call may go out as a line of a batch: the call's
-- ledger row is written (mode 'batch', its provider id the line's custom id), then the line
-- (llm_batch_lines, with the request it sends), and the job goes back to the queue, pending
-- but waiting for that call (waiting_for_call): no claim takes it, so it holds no worker slot
-- and no place under the global cap, while its reservation still counts against the budget.
-- One process at a time gathers the queued lines into batches (llm_batches), submits them,
-- polls them, and stores each line's answer or failure; the jobs whose lines have ended are
-- claimable again, and their next attempt takes the call over and settles it from the stored
-- answer, at the batch price, without paying again.
ALTER TABLE generation_jobs ADD COLUMN waiting_for_call bigint;

-- The waiting jobs: a handful of rows, read by the budget and by each batch pass's wake-up.
CREATE INDEX generation_jobs_waiting ON generation_jobs (waiting_for_call)
    WHERE status = 'pending' AND waiting_for_call IS NOT NULL;

CREATE TABLE llm_batches (
    id                bigserial PRIMARY KEY,
    -- submitting: its lines are chosen, the provider may not hold it yet (a pass that died
    -- here finds it again by its metadata); submitted: the provider's id is stored; ended:
    -- every line answered or failed.
    status            text NOT NULL DEFAULT 'submitting'
                      CHECK (status IN ('submitting', 'submitted', 'ended')),
    model             text NOT NULL,
    lines             integer NOT NULL,
    input_file_id     text,
    provider_batch_id text UNIQUE,
    -- As the provider last reported it: validating, in_progress, ..., completed, expired.
    provider_status   text,
    completed_lines   integer NOT NULL DEFAULT 0,
    failed_lines      integer NOT NULL DEFAULT 0,
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    submitted_at      timestamptz,
    ended_at          timestamptz
);

CREATE INDEX llm_batches_open ON llm_batches (id) WHERE status <> 'ended';

CREATE TABLE llm_batch_lines (
    call_id    bigint PRIMARY KEY REFERENCES llm_calls (id),
    custom_id  text NOT NULL UNIQUE,
    job_id     bigint NOT NULL,
    model      text NOT NULL,
    -- The body the line sends to the batch's endpoint.
    request    jsonb NOT NULL,
    batch_id   bigint REFERENCES llm_batches (id),
    status     text NOT NULL DEFAULT 'queued'
               CHECK (status IN ('queued', 'batched', 'answered', 'failed')),
    -- answered: the response's body; failed: why, and whether another line may succeed.
    answer     jsonb,
    error      text,
    retryable  boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz
);

CREATE INDEX llm_batch_lines_queued ON llm_batch_lines (model, created_at, call_id)
    WHERE status = 'queued';
CREATE INDEX llm_batch_lines_of_batch ON llm_batch_lines (batch_id);
CREATE INDEX llm_batch_lines_of_job ON llm_batch_lines (job_id);
-- Retention reads the ended lines oldest first.
CREATE INDEX llm_batch_lines_ended ON llm_batch_lines (ended_at) WHERE ended_at IS NOT NULL;

-- A waiting job's reservation counts as a generating one's does: the budget holds its share
-- until the job ends. Two branches, each through its own partial index.
CREATE OR REPLACE FUNCTION generation_budget_committed(moment timestamptz)
RETURNS TABLE (spent_usd numeric, reserved_usd numeric)
LANGUAGE sql STABLE AS $$
    SELECT
        (SELECT coalesce(sum(cost_usd), 0) FROM llm_calls
         WHERE started_at >= date_trunc('day', moment, 'UTC')),
        (SELECT coalesce(sum(greatest(g.reserved_usd - coalesce(s.spent, 0), 0)), 0)
         FROM (
             SELECT id, attempt, reserved_usd FROM generation_jobs WHERE status = 'generating'
             UNION ALL
             SELECT id, attempt, reserved_usd FROM generation_jobs
             WHERE status = 'pending' AND waiting_for_call IS NOT NULL
         ) g
         LEFT JOIN LATERAL (
             SELECT sum(c.cost_usd) AS spent FROM llm_calls c
             WHERE c.job_id = g.id AND c.attempt = g.attempt
         ) s ON true)
$$;

-- The claim of migration 0015, passing over the jobs that wait for a batch.
CREATE OR REPLACE FUNCTION generation_claim_within_cap(
    want int,
    global_cap int,
    replenish_cap int,
    worker text,
    at timestamptz,
    daily_budget numeric,
    reservation numeric,
    interactive_reserve numeric,
    domains text[]
)
RETURNS TABLE (
    id bigint, attempt int, lane text, user_id text, track text, domain text,
    created_at timestamptz
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- In READ COMMITTED each statement of a function takes its own snapshot: the claim's is
    -- taken after the lock is granted. Under any other isolation the whole transaction reads
    -- one snapshot taken before the lock, and the count misses claims that committed while
    -- this one waited: the cap would not hold, so the claim refuses to run.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'the claim must run in READ COMMITTED, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'warmpool sets default_transaction_isolation on its connections; '
                      || 'a pooler or a role setting must not change it';
    END IF;
    PERFORM pg_advisory_xact_lock(1, 0);
    RETURN QUERY
    WITH in_flight AS (
        SELECT count(*) AS total, count(*) FILTER (WHERE lane = 'replenish') AS replenish
        FROM generation_jobs WHERE status = 'generating'
    ),
    committed AS (
        -- Looked at only when there is a budget and a cost.
        SELECT spent_usd + reserved_usd AS usd
        FROM generation_budget_committed(coalesce(at, now()))
        WHERE daily_budget IS NOT NULL AND reservation > 0
    ),
    affordable AS (
        -- How many more jobs the budget allows in all, and in all before the interactive
        -- reserve; unlimited without a budget or a cost.
        SELECT CASE WHEN c.usd IS NULL THEN want
                    ELSE greatest(0, floor((daily_budget - c.usd) / reservation))::int
               END AS interactive,
               CASE WHEN c.usd IS NULL THEN want
                    ELSE greatest(
                        0, floor((daily_budget - interactive_reserve - c.usd) / reservation)
                    )::int
               END AS replenish
        FROM (SELECT (SELECT usd FROM committed) AS usd) c
    ),
    room AS (
        SELECT greatest(0, least(want, global_cap - f.total, a.interactive)) AS total,
               greatest(0, least(want, global_cap - f.total, replenish_cap - f.replenish))
                   AS replenish,
               a.replenish AS replenish_affordable
        FROM in_flight f, affordable a
    ),
    interactive AS (
        -- The domain is a filter on the pending index's walk in dispatch order, not a key of
        -- it: the jobs of domains this worker cannot make are passed over, at most the
        -- pending limit of them, and the order stays the index's.
        SELECT id, 0 AS lane_rank, fair_time FROM generation_jobs
        WHERE status = 'pending' AND lane = 'interactive' AND waiting_for_call IS NULL
          AND (domains IS NULL OR domain = ANY (domains))
        ORDER BY fair_time, id
        LIMIT (SELECT total FROM room)
        FOR UPDATE SKIP LOCKED
    ),
    replenish AS (
        -- The interactive jobs claimed in this same statement spend the budget first.
        SELECT id, 1 AS lane_rank, fair_time FROM generation_jobs
        WHERE status = 'pending' AND lane = 'replenish' AND waiting_for_call IS NULL
          AND (domains IS NULL OR domain = ANY (domains))
        ORDER BY fair_time, id
        LIMIT (SELECT greatest(0, least(
                   replenish, replenish_affordable - (SELECT count(*) FROM interactive)))
               FROM room)
        FOR UPDATE SKIP LOCKED
    ),
    chosen AS (
        SELECT id FROM (SELECT * FROM interactive UNION ALL SELECT * FROM replenish) candidates
        ORDER BY lane_rank, fair_time, id
        LIMIT (SELECT total FROM room)
    )
    UPDATE generation_jobs j
    SET status = 'generating', attempt = j.attempt + 1, worker_id = worker,
        started_at = coalesce(at, now()), heartbeat_at = coalesce(at, now()),
        reserved_usd = coalesce(reservation, 0)
    -- By primary key: a join could scan every pending row to find the few chosen.
    WHERE j.id = ANY (ARRAY(SELECT id FROM chosen)) AND j.status = 'pending'
    RETURNING j.id, j.attempt, j.lane, j.user_id, j.track, j.domain, j.created_at;
END
$$;
