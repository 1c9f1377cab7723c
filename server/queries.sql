-- Queries of the API keys (api_keys).

-- name: api_key_insert
INSERT INTO api_keys (name, role, key_hash) VALUES ($1::text, $2::text, $3::bytea)
RETURNING id;

-- name: api_key_by_hash
SELECT id, name, role FROM api_keys WHERE key_hash = $1::bytea AND revoked_at IS NULL;

-- name: api_key_by_id
-- A reviewer UI session names its key by id; a revoked key ends the session.
SELECT id, name, role FROM api_keys WHERE id = $1::bigint AND revoked_at IS NULL;

-- name: api_keys_exist
SELECT EXISTS (SELECT 1 FROM api_keys);

-- name: api_keys_bootstrap_lock
-- Two processes starting together on an empty database create one set of keys, not two.
SELECT pg_advisory_xact_lock(3, 0);
