-- The pool: generated missions with their proof and review, and per-user instances.

CREATE TABLE missions (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    domain           text NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('technical', 'non_technical')),
    language         text NOT NULL CHECK (language IN ('python', 'javascript', 'sql', 'none')),
    title            text NOT NULL,
    brief            text NOT NULL,
    gold_files       jsonb NOT NULL,
    test_files       jsonb NOT NULL,
    sabotaged_files  jsonb NOT NULL,
    -- Never shown to candidates: for reviewers and graders.
    bug_summary      text NOT NULL,
    grader_hint      text NOT NULL DEFAULT '',
    -- The executable proof: the gold run, every sabotage try's run, and the verdict.
    proof            jsonb NOT NULL,
    provider         text NOT NULL,
    prompt_version   text,
    job_id           bigint,
    -- The user whose interactive job asked for this mission, if any: reviewed first.
    requested_by     text,
    qa_status        text NOT NULL DEFAULT 'awaiting_review'
                     CHECK (qa_status IN ('awaiting_review', 'approved', 'rejected')),
    reviewed_by      text,
    reviewed_at      timestamptz,
    review_note      text,
    serve_count      integer NOT NULL DEFAULT 0,
    max_serves       integer NOT NULL CHECK (max_serves > 0),
    retired_at       timestamptz,
    retire_reason    text,
    -- sha256 of the domain and the files: the same mission is never stored twice.
    content_hash     bytea NOT NULL CONSTRAINT missions_content_hash_unique UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT missions_serves_within_limit CHECK (serve_count <= max_serves),
    CONSTRAINT missions_retired_with_reason CHECK ((retired_at IS NULL) = (retire_reason IS NULL))
);

-- Serving takes the least-served approved, unretired mission of a domain: this partial
-- index holds only those rows, in that order, however many retired missions pile up.
CREATE INDEX missions_servable ON missions (domain, serve_count, id)
    WHERE qa_status = 'approved' AND retired_at IS NULL;
CREATE INDEX missions_awaiting_review ON missions (domain, created_at)
    WHERE qa_status = 'awaiting_review';

CREATE TABLE mission_instances (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mission_id    bigint NOT NULL REFERENCES missions (id),
    user_id       text NOT NULL,
    track         text NOT NULL,
    -- A snapshot of what the candidate sees: the brief, the sabotaged code and the tests.
    domain        text NOT NULL,
    language      text NOT NULL,
    title         text NOT NULL,
    brief         text NOT NULL,
    files         jsonb NOT NULL,
    serve_number  integer NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mission_instances_once_per_user UNIQUE (mission_id, user_id)
);
CREATE INDEX mission_instances_user ON mission_instances (user_id, created_at DESC, id DESC);
