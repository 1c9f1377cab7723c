-- Keys, idempotency records, the generation queue and the spend ledger.

CREATE TABLE api_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    role        text NOT NULL CHECK (role IN ('candidate_app', 'qa_reviewer', 'admin')),
    -- sha256 of the key: keys carry 256 random bits, so a fast hash cannot be brute-forced.
    key_hash    bytea NOT NULL CONSTRAINT api_keys_key_hash_unique UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- One row per (caller, Idempotency-Key): the first request's fingerprint and what it created.
CREATE TABLE idempotency_keys (
    caller       text NOT NULL,
    key          text NOT NULL,
    fingerprint  bytea NOT NULL,
    job_id       bigint,
    instance_id  bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

CREATE TABLE generation_jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane          text NOT NULL CHECK (lane IN ('interactive', 'replenish')),
    user_id       text,
    track         text,
    domain        text NOT NULL,
    status        text NOT NULL DEFAULT 'pending' CHECK (
        status IN ('pending', 'generating', 'awaiting_review', 'completed', 'failed', 'cancelled')
    ),
    -- The fencing token: bumped by every claim and release, carried by every later transition.
    attempt       integer NOT NULL DEFAULT 0,
    worker_id     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- Fair-queuing virtual time: a user's k-th pending job gets created_at, or its previous
    -- pending job's fair_time plus a step, whichever is later. Dispatching in fair_time order
    -- is oldest first, yet round-robin across users (see generation/queries.sql).
    fair_time     timestamptz NOT NULL,
    started_at    timestamptz,
    heartbeat_at  timestamptz,
    finished_at   timestamptz,
    error         text,
    mission_id    bigint,
    instance_id   bigint,
    CONSTRAINT generation_jobs_user_per_lane CHECK ((lane = 'interactive') = (user_id IS NOT NULL))
);

-- Partial indexes on the live rows only, so claims and counts stay flat as history grows.
CREATE INDEX generation_jobs_pending ON generation_jobs (lane, fair_time, id)
    WHERE status = 'pending';
CREATE INDEX generation_jobs_generating ON generation_jobs (worker_id)
    WHERE status = 'generating';
CREATE INDEX generation_jobs_active_per_user ON generation_jobs (user_id)
    WHERE status IN ('pending', 'generating', 'awaiting_review');
CREATE INDEX generation_jobs_finished ON generation_jobs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- The spend ledger: one row per model call, written before the call starts. It has no
-- foreign key on purpose: spend outlives the retention of finished jobs.
CREATE TABLE llm_calls (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id         bigint NOT NULL,
    attempt        integer NOT NULL,
    purpose        text NOT NULL CHECK (purpose IN ('generate', 'sabotage')),
    provider       text NOT NULL,
    model          text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    input_tokens   integer NOT NULL DEFAULT 0,
    output_tokens  integer NOT NULL DEFAULT 0,
    cost_usd       numeric(14, 6) NOT NULL DEFAULT 0,
    -- started: under way, or its process died mid-call (the cost is then unknown).
    -- unbilled: failed in a way known not to have reached the model (retried by policy).
    outcome        text NOT NULL DEFAULT 'started' CHECK (
        outcome IN ('started', 'ok', 'failed', 'refused', 'malformed', 'unbilled')
    ),
    -- The job was no longer generating under this attempt when the call finished.
    orphaned       boolean NOT NULL DEFAULT false,
    error          text
);
CREATE INDEX llm_calls_job ON llm_calls (job_id, attempt);
CREATE INDEX llm_calls_started ON llm_calls (started_at);
