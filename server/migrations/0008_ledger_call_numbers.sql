-- Each model call of an attempt has a number (1, 2, ...), so that writing its ledger row is
-- idempotent: a retry after a commit whose answer was lost in an outage finds the row the
-- first try wrote instead of booking the call twice.
ALTER TABLE llm_calls ADD COLUMN call_number integer;

UPDATE llm_calls c SET call_number = numbered.call_number
FROM (
    SELECT id, row_number() OVER (PARTITION BY job_id, attempt ORDER BY id) AS call_number
    FROM llm_calls
) numbered
WHERE c.id = numbered.id;

ALTER TABLE llm_calls ALTER COLUMN call_number SET NOT NULL;

-- Serves the lookups by (job_id, attempt) that llm_calls_job served.
CREATE UNIQUE INDEX llm_calls_job_call ON llm_calls (job_id, attempt, call_number);
DROP INDEX llm_calls_job;
