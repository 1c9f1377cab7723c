-- A worker claims only the jobs of the domains it can make (its proof tools are there), so a
-- fleet where only some workers have Node.js or pgTAP hands each job to a worker that can make
-- it; a job no live worker can make stays pending until one can, or until it expires.
--
-- The same claim as before (migrations 0007 and 0009 have the whole argument) with one
-- parameter more, `domains`: NULL claims every domain. A new function beside the old one
-- rather than a replacement, so the workers of the previous release, which go on running
-- during a rolling deploy, keep calling the eight-argument form, which now delegates with
-- every domain.
CREATE FUNCTION generation_claim_within_cap(
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
        WHERE status = 'pending' AND lane = 'interactive'
          AND (domains IS NULL OR domain = ANY (domains))
        ORDER BY fair_time, id
        LIMIT (SELECT total FROM room)
        FOR UPDATE SKIP LOCKED
    ),
    replenish AS (
        -- The interactive jobs claimed in this same statement spend the budget first.
        SELECT id, 1 AS lane_rank, fair_time FROM generation_jobs
        WHERE status = 'pending' AND lane = 'replenish'
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

-- The previous release's form: every domain. Replaced in place, so the workers that still
-- call it by its eight arguments find it.
CREATE OR REPLACE FUNCTION generation_claim_within_cap(
    want int,
    global_cap int,
    replenish_cap int,
    worker text,
    at timestamptz,
    daily_budget numeric,
    reservation numeric,
    interactive_reserve numeric
)
RETURNS TABLE (
    id bigint, attempt int, lane text, user_id text, track text, domain text,
    created_at timestamptz
)
LANGUAGE sql AS $$
    SELECT * FROM generation_claim_within_cap(
        want, global_cap, replenish_cap, worker, at, daily_budget, reservation,
        interactive_reserve, NULL::text[]
    );
$$;
