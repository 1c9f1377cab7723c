-- What /metrics reads without scanning the tables that grow forever.
--
-- The ledger's totals per outcome, kept by triggers on the statements that change the ledger.
-- Each statement adds its rows' figures once, per outcome (a bulk load of a million rows is one
-- upsert); an update moves its rows from the old outcome to the new one. Only the ledger's own
-- statements pay for it, never a serve: a call's start and end (one statement each, in a
-- transaction of its own) update the total of 'started' and of its outcome, in outcome order, so
-- two calls ending at once never deadlock. The totals are spread over shards, each backend
-- writing the one its process id picks, so that the calls of many workers do not all queue on
-- the one row of 'started'.
CREATE TABLE llm_spend_totals (
    outcome        text NOT NULL,
    shard          smallint NOT NULL,
    llm_calls      bigint NOT NULL,
    input_tokens   bigint NOT NULL,
    output_tokens  bigint NOT NULL,
    cost_usd       numeric NOT NULL,
    PRIMARY KEY (outcome, shard)
);

-- TG_ARGV[0] is +1 for the rows a statement added (inserted, or updated to) and -1 for those it
-- took away (deleted, or updated from).
CREATE FUNCTION llm_spend_totals_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    direction CONSTANT int := TG_ARGV[0]::int;
BEGIN
    INSERT INTO llm_spend_totals AS total
        (outcome, shard, llm_calls, input_tokens, output_tokens, cost_usd)
    SELECT outcome, pg_backend_pid() % 16, direction * count(*), direction * sum(input_tokens),
           direction * sum(output_tokens), direction * sum(cost_usd)
    FROM changed_rows
    GROUP BY outcome
    -- Every statement locks the totals' rows in the same order.
    ORDER BY outcome
    ON CONFLICT (outcome, shard) DO UPDATE
    SET llm_calls = total.llm_calls + excluded.llm_calls,
        input_tokens = total.input_tokens + excluded.input_tokens,
        output_tokens = total.output_tokens + excluded.output_tokens,
        cost_usd = total.cost_usd + excluded.cost_usd;
    RETURN NULL;
END
$$;

-- No write to the ledger between the totals' first count and their triggers.
LOCK TABLE llm_calls IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO llm_spend_totals (outcome, shard, llm_calls, input_tokens, output_tokens, cost_usd)
SELECT outcome, 0, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)
FROM llm_calls
GROUP BY outcome;

-- An update's two triggers run in name order: the old outcome's total first, as above.
CREATE TRIGGER llm_calls_inserted AFTER INSERT ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_totals_add('1');
CREATE TRIGGER llm_calls_updated_from AFTER UPDATE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_totals_add('-1');
CREATE TRIGGER llm_calls_updated_to AFTER UPDATE ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_totals_add('1');
CREATE TRIGGER llm_calls_deleted AFTER DELETE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_totals_add('-1');

-- Every mission out of the stock (in review, rejected or retired), which missions_servable
-- does not hold: with it, these indexes hold each mission once. The first is read by review
-- time (the replenisher's window of reviews), the second summed for the serves ever made. A
-- serve that does not retire its mission writes nothing to either, as its row stays in the
-- stock; the serve that retires it writes its one entry in each.
CREATE INDEX missions_out_of_stock ON missions (domain, reviewed_at)
    WHERE qa_status <> 'approved' OR retired_at IS NOT NULL;
CREATE INDEX missions_out_of_stock_serves ON missions (domain) INCLUDE (serve_count)
    WHERE qa_status <> 'approved' OR retired_at IS NOT NULL;
