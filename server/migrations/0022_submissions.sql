-- Grading a candidate's fix: a submission is a row, and grading it is work for the same
-- discipline as generation: claimed by a conditional update under a cap counted from this
-- table, fenced by attempt, swept when its worker dies.
CREATE TABLE submissions (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instance_id         bigint NOT NULL REFERENCES mission_instances (id),
    mission_id          bigint NOT NULL REFERENCES missions (id),
    user_id             text NOT NULL,
    language            text NOT NULL CHECK (language IN ('python', 'javascript', 'sql')),
    -- When the instance was served: a passing submission's time since then is a QA signal.
    instance_created_at timestamptz NOT NULL,
    created_by          bigint,
    -- The Idempotency-Key's scope (the caller) and the request's fingerprint.
    caller              text NOT NULL,
    idempotency_key     text NOT NULL,
    fingerprint         bytea NOT NULL,
    -- What the candidate sent, and what grading runs: the instance's code with those files
    -- in place, its visible tests and the mission's hidden tests (never shown to anyone but
    -- reviewers, and only on the mission).
    files               jsonb NOT NULL,
    code_files          jsonb NOT NULL,
    visible_test_files  jsonb NOT NULL,
    hidden_test_files   jsonb NOT NULL,
    -- The hidden tests' ids as the gold's proof found them: a report naming others is forged.
    hidden_test_ids     text[],
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'passed', 'failed', 'error')),
    attempt             integer NOT NULL DEFAULT 0,
    worker_id           text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    heartbeat_at        timestamptz,
    finished_at         timestamptz,
    visible_passed      integer,
    visible_failed      integer,
    visible_total       integer,
    hidden_passed       integer,
    hidden_failed       integer,
    hidden_total        integer,
    tests               jsonb NOT NULL DEFAULT '[]',
    duration_s          double precision,
    error               text,
    CONSTRAINT submissions_idempotency_unique UNIQUE (caller, idempotency_key)
);

-- The claim's order and the pending depth, however long the history grows.
CREATE INDEX submissions_pending ON submissions (created_at, id) WHERE status = 'pending';
-- The cap's count and the sweeper.
CREATE INDEX submissions_running ON submissions (heartbeat_at) WHERE status = 'running';
-- The per-user cap.
CREATE INDEX submissions_active_by_user ON submissions (user_id)
    WHERE status IN ('pending', 'running');
CREATE INDEX submissions_by_instance ON submissions (instance_id, created_at DESC, id DESC);
-- Pass rates per mission.
CREATE INDEX submissions_graded_by_mission ON submissions (mission_id)
    WHERE status IN ('passed', 'failed', 'error');

-- What each worker can grade: candidate code is always untrusted, so a language is gradable
-- only where the full sandbox works, which is not what the worker's domains say.
ALTER TABLE workers
    ADD COLUMN grading_languages text[] NOT NULL DEFAULT '{}',
    ADD COLUMN grading_disabled jsonb NOT NULL DEFAULT '{}';

-- A submission as the API shows it, never its files or hidden tests. Its queue position
-- follows the claim's order (created_at, id), counted through submissions_pending.
CREATE VIEW submission_views AS
SELECT s.id, s.instance_id, s.user_id, s.created_by, s.status, s.created_at, s.started_at,
       s.finished_at, s.visible_passed, s.visible_failed, s.visible_total, s.hidden_passed,
       s.hidden_failed, s.hidden_total, s.tests, s.duration_s, s.error,
       CASE WHEN s.status = 'pending' THEN (
           SELECT count(*) FROM submissions p
           WHERE p.status = 'pending' AND (p.created_at, p.id) < (s.created_at, s.id)
       ) END AS queue_position
FROM submissions s;
