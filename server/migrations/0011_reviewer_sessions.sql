-- The reviewer UI's sessions as rows: the cookie names one, and only a live row lets it in, so
-- signing out (or deleting the key) ends every copy of the cookie at once.
CREATE TABLE reviewer_sessions (
    -- sha256 of the random token the cookie carries: what the table holds cannot sign anyone in.
    token_hash  bytea PRIMARY KEY,
    api_key_id  bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL,
    -- Set once, at sign-in: however busy, a session ends by then.
    expires_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    CONSTRAINT reviewer_sessions_expire_after_start CHECK (expires_at > created_at)
);

-- Deleting a key finds its sessions through this index instead of reading the whole table.
CREATE INDEX reviewer_sessions_api_key ON reviewer_sessions (api_key_id);

-- Retention finds the sessions that stopped working (signed out, or expired) before a moment.
CREATE INDEX reviewer_sessions_stopped ON reviewer_sessions ((coalesce(ended_at, expires_at)));
