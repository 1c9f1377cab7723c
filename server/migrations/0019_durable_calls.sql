-- Model calls that outlive their worker. A call in background mode is a remote operation
-- with an id (`provider_id`), stored on its row as soon as the provider names it; whoever holds
-- the job next takes the call over by that id instead of paying for it again. The row stays
-- under the attempt that made (and billed) it; `resumed_by_attempt` names the attempt that
-- holds it now, the only one that may settle it, and `resumed` counts the takeovers.
-- `try_number` names the call within its purpose (the sabotage try), which is what a later
-- attempt looks it up by. `dropped_at`: a takeover found that the provider no longer holds the
-- call, which therefore saved nothing. Columns with constant defaults: no rewrite of the ledger.
ALTER TABLE llm_calls
    ADD COLUMN mode text NOT NULL DEFAULT 'direct'
        CHECK (mode IN ('direct', 'background', 'batch')),
    ADD COLUMN provider_id text,
    ADD COLUMN try_number integer NOT NULL DEFAULT 1,
    ADD COLUMN resumed_by_attempt integer,
    ADD COLUMN resumed integer NOT NULL DEFAULT 0,
    ADD COLUMN dropped_at timestamptz;

-- The calls still open at the provider: a handful of rows, however long the ledger grows,
-- read when a job's calls are taken over or abandoned.
CREATE INDEX llm_calls_open_at_provider ON llm_calls (job_id)
    WHERE provider_id IS NOT NULL AND finished_at IS NULL;

-- The totals of migration 0014 per mode too, with the takeovers and what they saved (each
-- takeover is a call not paid for again: the cost of the call it took over).
LOCK TABLE llm_calls IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE llm_spend_totals
    ADD COLUMN mode text NOT NULL DEFAULT 'direct',
    ADD COLUMN resumed_calls bigint NOT NULL DEFAULT 0,
    ADD COLUMN saved_usd numeric NOT NULL DEFAULT 0,
    DROP CONSTRAINT llm_spend_totals_pkey,
    ADD PRIMARY KEY (outcome, mode, shard);

CREATE OR REPLACE FUNCTION llm_spend_totals_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    direction CONSTANT int := TG_ARGV[0]::int;
BEGIN
    INSERT INTO llm_spend_totals AS total
        (outcome, mode, shard, llm_calls, input_tokens, output_tokens, cost_usd, resumed_calls,
         saved_usd)
    SELECT outcome, mode, pg_backend_pid() % 16, direction * count(*),
           direction * sum(input_tokens), direction * sum(output_tokens),
           direction * sum(cost_usd), direction * sum(resumed), direction * sum(resumed * cost_usd)
    FROM changed_rows
    GROUP BY outcome, mode
    -- Every statement locks the totals' rows in the same order.
    ORDER BY outcome, mode
    ON CONFLICT (outcome, mode, shard) DO UPDATE
    SET llm_calls = total.llm_calls + excluded.llm_calls,
        input_tokens = total.input_tokens + excluded.input_tokens,
        output_tokens = total.output_tokens + excluded.output_tokens,
        cost_usd = total.cost_usd + excluded.cost_usd,
        resumed_calls = total.resumed_calls + excluded.resumed_calls,
        saved_usd = total.saved_usd + excluded.saved_usd;
    RETURN NULL;
END
$$;
