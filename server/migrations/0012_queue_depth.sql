-- The pending depth per lane, kept as it changes, so that an enqueue's depth limit reads a
-- few rows instead of counting every pending job: the enqueue's cost stays flat however deep
-- the queue is. Spread over shards, each backend writing the one its process id picks, so
-- concurrent enqueues rarely wait on each other's row lock; the depth is the sum of the
-- shards, exact in every snapshot since each change commits with the jobs it counts.
CREATE TABLE generation_queue_depth (
    shard        smallint PRIMARY KEY,
    interactive  bigint NOT NULL DEFAULT 0,
    replenish    bigint NOT NULL DEFAULT 0
);

INSERT INTO generation_queue_depth (shard, interactive, replenish)
SELECT shard,
       CASE WHEN shard = 0 THEN (SELECT count(*) FROM generation_jobs
                                 WHERE status = 'pending' AND lane = 'interactive') ELSE 0 END,
       CASE WHEN shard = 0 THEN (SELECT count(*) FROM generation_jobs
                                 WHERE status = 'pending' AND lane = 'replenish') ELSE 0 END
FROM generate_series(0, 63) AS shard;

-- Once per statement, from the rows it changed: a job's lane never changes, so the depth moves
-- by the jobs that entered pending minus those that left it. Per statement rather than per
-- row: a statement that moves thousands of jobs (the pending expiry after an outage) updates
-- its shard once, not once per job.
CREATE FUNCTION generation_queue_depth_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    interactive_change bigint := 0;
    replenish_change bigint := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT count(*) FILTER (WHERE lane = 'interactive'), count(*) FILTER (WHERE lane = 'replenish')
        INTO interactive_change, replenish_change
        FROM new_rows WHERE status = 'pending';
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        SELECT interactive_change - count(*) FILTER (WHERE lane = 'interactive'),
               replenish_change - count(*) FILTER (WHERE lane = 'replenish')
        INTO interactive_change, replenish_change
        FROM old_rows WHERE status = 'pending';
    END IF;
    IF interactive_change <> 0 OR replenish_change <> 0 THEN
        UPDATE generation_queue_depth
        SET interactive = interactive + interactive_change,
            replenish = replenish + replenish_change
        WHERE shard = pg_backend_pid() % 64;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER generation_queue_depth_on_insert AFTER INSERT ON generation_jobs
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION generation_queue_depth_follow();
CREATE TRIGGER generation_queue_depth_on_update AFTER UPDATE ON generation_jobs
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION generation_queue_depth_follow();
CREATE TRIGGER generation_queue_depth_on_delete AFTER DELETE ON generation_jobs
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION generation_queue_depth_follow();
