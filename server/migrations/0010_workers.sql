-- Workers as rows: each worker process holds its worker's name while it runs, heartbeating
-- what it can make. A name held by a process that still heartbeats is refused to a second one:
-- two workers under one name would each take the other's jobs for a dead process's.
CREATE TABLE workers (
    name          text PRIMARY KEY,
    -- name:host:pid of the process holding the name, as in generation_jobs.worker_id.
    worker_id     text NOT NULL,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    slots         integer NOT NULL,
    running       integer NOT NULL DEFAULT 0,
    -- The domains this worker's proof tools let it make, and why it cannot make the others.
    domains       text[] NOT NULL DEFAULT '{}',
    disabled      jsonb NOT NULL DEFAULT '{}'
);
