-- A call is written with its ceiling, so that one cut off before the provider named it (its
-- process killed while the request was out) can be booked at what it may have cost once its
-- attempt has let the job go: nobody can find it at the provider again.
ALTER TABLE llm_calls ADD COLUMN ceiling_usd numeric;

-- Open calls the provider has not named: the ones under way now, and the ones cut off until
-- they are booked; a handful of rows, however long the ledger grows.
CREATE INDEX llm_calls_open_unnamed ON llm_calls (started_at)
    WHERE provider_id IS NULL AND finished_at IS NULL;
