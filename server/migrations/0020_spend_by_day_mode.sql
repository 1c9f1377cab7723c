-- The ledger per day of migration 0017 per mode too, with the takeovers and what they saved,
-- as migration 0019 keeps the totals: the spend page shows what each mode cost and saved.
-- The rows kept so far were all direct calls, none taken over: their defaults are right.
LOCK TABLE llm_calls IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE llm_spend_daily
    ADD COLUMN mode text NOT NULL DEFAULT 'direct',
    ADD COLUMN resumed_calls bigint NOT NULL DEFAULT 0,
    ADD COLUMN saved_usd numeric NOT NULL DEFAULT 0,
    DROP CONSTRAINT llm_spend_daily_pkey,
    ADD PRIMARY KEY (day, model, purpose, outcome, mode, shard);

CREATE OR REPLACE FUNCTION llm_spend_daily_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    direction CONSTANT int := TG_ARGV[0]::int;
BEGIN
    INSERT INTO llm_spend_daily AS total
        (day, model, purpose, outcome, mode, shard, llm_calls, input_tokens, output_tokens,
         cost_usd, resumed_calls, saved_usd)
    SELECT (started_at AT TIME ZONE 'UTC')::date, model, purpose, outcome, mode,
           pg_backend_pid() % 16, direction * count(*), direction * sum(input_tokens),
           direction * sum(output_tokens), direction * sum(cost_usd), direction * sum(resumed),
           direction * sum(resumed * cost_usd)
    FROM changed_rows
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (day, model, purpose, outcome, mode, shard) DO UPDATE
    SET llm_calls = total.llm_calls + excluded.llm_calls,
        input_tokens = total.input_tokens + excluded.input_tokens,
        output_tokens = total.output_tokens + excluded.output_tokens,
        cost_usd = total.cost_usd + excluded.cost_usd,
        resumed_calls = total.resumed_calls + excluded.resumed_calls,
        saved_usd = total.saved_usd + excluded.saved_usd;
    RETURN NULL;
END
$$;
