-- Queries of the idempotency records (idempotency_keys).

-- name: idempotency_claim
-- A concurrent request with the same key blocks here on the unique index until the first
-- one's transaction ends: then it finds the row (first committed) or inserts its own
-- (first rolled back). So one key never creates two things.
INSERT INTO idempotency_keys (caller, key, fingerprint)
VALUES ($1::text, $2::text, $3::bytea)
ON CONFLICT (caller, key) DO NOTHING
RETURNING true;

-- name: idempotency_lookup
SELECT fingerprint, job_id, instance_id FROM idempotency_keys
WHERE caller = $1::text AND key = $2::text;

-- name: idempotency_remember
UPDATE idempotency_keys SET job_id = $3::bigint, instance_id = $4::bigint
WHERE caller = $1::text AND key = $2::text;

-- name: idempotency_forget_before
DELETE FROM idempotency_keys WHERE created_at < $1::timestamptz;
