-- Queries of the API keys (api_keys) and the reviewer UI's sessions (reviewer_sessions).

-- name: api_key_insert
INSERT INTO api_keys (name, role, key_hash) VALUES ($1::text, $2::text, $3::bytea)
RETURNING id;

-- name: api_key_by_hash
SELECT id, name, role FROM api_keys WHERE key_hash = $1::bytea AND revoked_at IS NULL;

-- name: api_keys_exist
SELECT EXISTS (SELECT 1 FROM api_keys);

-- name: api_keys_bootstrap_lock
-- Two processes starting together on an empty database create one set of keys, not two.
-- advisory lock: api_keys_bootstrap (core/locks.py)
SELECT pg_advisory_xact_lock(3, 0);

-- name: reviewer_session_start
-- A session that expires a fixed lifetime after it starts, whatever happens in between.
INSERT INTO reviewer_sessions (token_hash, api_key_id, created_at, expires_at)
VALUES ($1::bytea, $2::bigint, coalesce($4::timestamptz, now()),
        coalesce($4::timestamptz, now()) + $3::interval);

-- name: reviewer_session_key_if_live
-- Every page: the session's key, if the session is neither ended nor expired and the key not
-- revoked. Both tables are read by primary key.
SELECT k.id, k.name, k.role
FROM reviewer_sessions s
JOIN api_keys k ON k.id = s.api_key_id
WHERE s.token_hash = $1::bytea
  AND s.ended_at IS NULL
  AND s.expires_at > coalesce($2::timestamptz, now())
  AND k.revoked_at IS NULL;

-- name: reviewer_session_end_if_live
-- Signing out. A session that has already ended or expired keeps the moment it stopped.
UPDATE reviewer_sessions SET ended_at = coalesce($2::timestamptz, now())
WHERE token_hash = $1::bytea
  AND ended_at IS NULL
  AND expires_at > coalesce($2::timestamptz, now());

-- name: reviewer_sessions_delete_stopped_before
-- The same expression as the reviewer_sessions_stopped index, so the index finds the rows.
DELETE FROM reviewer_sessions WHERE coalesce(ended_at, expires_at) < $1::timestamptz;

-- name: schema_migrations_lock
-- Held for a whole run of migrations: processes starting together queue here, the first
-- applies what is missing, the others then find nothing left to do.
-- advisory lock: migrations (core/locks.py)
SELECT pg_advisory_lock(2002874989);

-- name: schema_migrations_unlock
-- advisory lock: migrations (core/locks.py)
SELECT pg_advisory_unlock(2002874989);

-- name: schema_migrations_create
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: schema_migrations_applied
SELECT version, name FROM schema_migrations ORDER BY version;

-- name: schema_migration_record
INSERT INTO schema_migrations (version, name) VALUES ($1::int, $2::text);

-- name: schema_migrations_exist
SELECT to_regclass('schema_migrations') IS NOT NULL;

-- name: schema_version
SELECT coalesce(max(version), 0) FROM schema_migrations;

-- name: embedded_database_exists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'warmpool');

-- name: embedded_database_create
-- The embedded default's database; its name is server.database.EMBEDDED_DATABASE.
CREATE DATABASE warmpool;
