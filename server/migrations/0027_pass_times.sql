-- How long candidates take to solve a domain's missions: the time from an instance's serve to
-- each passing submission, as histogram buckets per domain, kept as each grading passes (as
-- submission_totals keeps the counts), so that /metrics gives a median per domain
-- (histogram_quantile) without reading the submissions. A bucket holds the passes of at most
-- `le` seconds and more than the bound below it (server/metrics.py makes them cumulative);
-- spread over shards as submission_totals is.
CREATE TABLE submission_pass_times (
    domain       text NOT NULL,
    le           double precision NOT NULL,
    shard        smallint NOT NULL,
    submissions  bigint NOT NULL,
    seconds      double precision NOT NULL,
    PRIMARY KEY (domain, le, shard)
);

-- The buckets' upper bounds, in seconds: the same as PASS_TIME_BUCKETS in server/metrics.py.
CREATE FUNCTION submission_pass_time_bucket(seconds double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT min(le) FROM unnest(
        ARRAY[60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 'Infinity']::float8[]
    ) AS bound(le)
    WHERE le >= seconds
$$;

CREATE FUNCTION submission_pass_time_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    taken double precision := extract(epoch FROM NEW.created_at - NEW.instance_created_at);
BEGIN
    INSERT INTO submission_pass_times AS bucket (domain, le, shard, submissions, seconds)
    SELECT domain, submission_pass_time_bucket(taken), pg_backend_pid() % 16, 1, taken
    FROM missions WHERE id = NEW.mission_id
    ON CONFLICT (domain, le, shard) DO UPDATE
    SET submissions = bucket.submissions + 1, seconds = bucket.seconds + taken;
    RETURN NULL;
END
$$;

-- No grading passes between the first count and the triggers.
LOCK TABLE submissions IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO submission_pass_times (domain, le, shard, submissions, seconds)
SELECT m.domain, submission_pass_time_bucket(taken.seconds), 0, count(*), sum(taken.seconds)
FROM submissions s
JOIN missions m ON m.id = s.mission_id
CROSS JOIN LATERAL (
    SELECT extract(epoch FROM s.created_at - s.instance_created_at)::float8 AS seconds
) taken
WHERE s.status = 'passed'
GROUP BY m.domain, submission_pass_time_bucket(taken.seconds);

CREATE TRIGGER submissions_passed_on_insert AFTER INSERT ON submissions
    FOR EACH ROW WHEN (NEW.status = 'passed')
    EXECUTE FUNCTION submission_pass_time_add();
CREATE TRIGGER submissions_passed AFTER UPDATE OF status ON submissions
    FOR EACH ROW
    WHEN (OLD.status NOT IN ('passed', 'failed', 'error') AND NEW.status = 'passed')
    EXECUTE FUNCTION submission_pass_time_add();
