-- Graded submissions per domain and verdict, kept as each grading ends (as llm_spend_totals
-- keeps the ledger's), so that /metrics reads a handful of rows, never the submissions. Row
-- triggers, on the status alone: a heartbeat writes nothing here. Spread over shards, each
-- backend writing the one its process id picks, so concurrent gradings do not queue on a row.
CREATE TABLE submission_totals (
    domain       text NOT NULL,
    status       text NOT NULL CHECK (status IN ('passed', 'failed', 'error')),
    shard        smallint NOT NULL,
    submissions  bigint NOT NULL,
    PRIMARY KEY (domain, status, shard)
);

CREATE FUNCTION submission_totals_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO submission_totals AS total (domain, status, shard, submissions)
    SELECT domain, NEW.status, pg_backend_pid() % 16, 1 FROM missions WHERE id = NEW.mission_id
    ON CONFLICT (domain, status, shard) DO UPDATE SET submissions = total.submissions + 1;
    RETURN NULL;
END
$$;

-- No grading ends between the first count and the triggers.
LOCK TABLE submissions IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO submission_totals (domain, status, shard, submissions)
SELECT m.domain, s.status, 0, count(*)
FROM submissions s JOIN missions m ON m.id = s.mission_id
WHERE s.status IN ('passed', 'failed', 'error')
GROUP BY m.domain, s.status;

CREATE TRIGGER submissions_graded_on_insert AFTER INSERT ON submissions
    FOR EACH ROW WHEN (NEW.status IN ('passed', 'failed', 'error'))
    EXECUTE FUNCTION submission_totals_add();
CREATE TRIGGER submissions_graded AFTER UPDATE OF status ON submissions
    FOR EACH ROW
    WHEN (OLD.status NOT IN ('passed', 'failed', 'error')
          AND NEW.status IN ('passed', 'failed', 'error'))
    EXECUTE FUNCTION submission_totals_add();
