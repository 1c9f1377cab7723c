-- The ledger per UTC day of the call's start, model, purpose and outcome, kept by triggers as
-- llm_spend_totals is (migration 0014), so the spend page reads a few rows a day however long
-- the ledger grows. The day is the budget's: a call counts on the day it started. The same
-- shards, and the same order of locks: an update's triggers take its old outcome's rows
-- first, and these triggers run before the totals' (trigger names sort so), in every statement.
CREATE TABLE llm_spend_daily (
    day            date NOT NULL,
    model          text NOT NULL,
    purpose        text NOT NULL,
    outcome        text NOT NULL,
    shard          smallint NOT NULL,
    llm_calls      bigint NOT NULL,
    input_tokens   bigint NOT NULL,
    output_tokens  bigint NOT NULL,
    cost_usd       numeric NOT NULL,
    PRIMARY KEY (day, model, purpose, outcome, shard)
);

-- TG_ARGV[0] is +1 for the rows a statement added (inserted, or updated to) and -1 for those it
-- took away (deleted, or updated from).
CREATE FUNCTION llm_spend_daily_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    direction CONSTANT int := TG_ARGV[0]::int;
BEGIN
    INSERT INTO llm_spend_daily AS total
        (day, model, purpose, outcome, shard, llm_calls, input_tokens, output_tokens, cost_usd)
    SELECT (started_at AT TIME ZONE 'UTC')::date, model, purpose, outcome,
           pg_backend_pid() % 16, direction * count(*), direction * sum(input_tokens),
           direction * sum(output_tokens), direction * sum(cost_usd)
    FROM changed_rows
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, model, purpose, outcome, shard) DO UPDATE
    SET llm_calls = total.llm_calls + excluded.llm_calls,
        input_tokens = total.input_tokens + excluded.input_tokens,
        output_tokens = total.output_tokens + excluded.output_tokens,
        cost_usd = total.cost_usd + excluded.cost_usd;
    RETURN NULL;
END
$$;

LOCK TABLE llm_calls IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO llm_spend_daily
    (day, model, purpose, outcome, shard, llm_calls, input_tokens, output_tokens, cost_usd)
SELECT (started_at AT TIME ZONE 'UTC')::date, model, purpose, outcome, 0, count(*),
       sum(input_tokens), sum(output_tokens), sum(cost_usd)
FROM llm_calls
GROUP BY 1, 2, 3, 4;

CREATE TRIGGER llm_calls_daily_inserted AFTER INSERT ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_daily_add('1');
CREATE TRIGGER llm_calls_daily_updated_from AFTER UPDATE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_daily_add('-1');
CREATE TRIGGER llm_calls_daily_updated_to AFTER UPDATE ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_daily_add('1');
CREATE TRIGGER llm_calls_daily_deleted AFTER DELETE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_daily_add('-1');
