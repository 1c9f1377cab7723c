-- Which API key made each job and each instance: NULL for the pool's own replenishment jobs.
-- With WARMPOOL_CANDIDATE_KEY_SCOPE=own a candidate key sees only what it made.
ALTER TABLE generation_jobs ADD COLUMN created_by bigint;
ALTER TABLE mission_instances ADD COLUMN created_by bigint;
