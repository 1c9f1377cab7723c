-- The ledger per domain, so that the pool can say what a served instance cost (a domain's
-- spend over its serves) without reading the ledger. A call names the domain of its job, which
-- exists when the call starts (and may be deleted by retention later); the totals are kept by
-- statement triggers as llm_spend_totals is (migration 0014), spread over shards.
ALTER TABLE llm_calls ADD COLUMN domain text;

CREATE FUNCTION llm_calls_domain_of_job() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.domain IS NULL THEN
        NEW.domain := (SELECT domain FROM generation_jobs WHERE id = NEW.job_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TABLE llm_spend_by_domain (
    domain     text NOT NULL,
    shard      smallint NOT NULL,
    llm_calls  bigint NOT NULL,
    cost_usd   numeric NOT NULL,
    PRIMARY KEY (domain, shard)
);

-- TG_ARGV[0] is +1 for the rows a statement added and -1 for those it took away.
CREATE FUNCTION llm_spend_by_domain_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    direction CONSTANT int := TG_ARGV[0]::int;
BEGIN
    INSERT INTO llm_spend_by_domain AS total (domain, shard, llm_calls, cost_usd)
    SELECT domain, pg_backend_pid() % 16, direction * count(*), direction * sum(cost_usd)
    FROM changed_rows
    WHERE domain IS NOT NULL
    GROUP BY domain
    -- Every statement locks the totals' rows in the same order.
    ORDER BY domain
    ON CONFLICT (domain, shard) DO UPDATE
    SET llm_calls = total.llm_calls + excluded.llm_calls,
        cost_usd = total.cost_usd + excluded.cost_usd;
    RETURN NULL;
END
$$;

-- No write to the ledger between the first count and the triggers.
LOCK TABLE llm_calls IN SHARE ROW EXCLUSIVE MODE;

UPDATE llm_calls c SET domain = j.domain FROM generation_jobs j WHERE j.id = c.job_id;

INSERT INTO llm_spend_by_domain (domain, shard, llm_calls, cost_usd)
SELECT domain, 0, count(*), sum(cost_usd) FROM llm_calls WHERE domain IS NOT NULL GROUP BY domain;

CREATE TRIGGER llm_calls_domain BEFORE INSERT ON llm_calls
    FOR EACH ROW EXECUTE FUNCTION llm_calls_domain_of_job();
-- An update's two triggers run in name order, as those of migration 0014.
CREATE TRIGGER llm_calls_by_domain_inserted AFTER INSERT ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_by_domain_add('1');
CREATE TRIGGER llm_calls_by_domain_updated_from AFTER UPDATE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_by_domain_add('-1');
CREATE TRIGGER llm_calls_by_domain_updated_to AFTER UPDATE ON llm_calls
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_by_domain_add('1');
CREATE TRIGGER llm_calls_by_domain_deleted AFTER DELETE ON llm_calls
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm_spend_by_domain_add('-1');
