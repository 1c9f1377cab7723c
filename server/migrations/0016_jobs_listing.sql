-- What the jobs page lists, newest first, without reading the history it does not show.
--
-- The page's filters (status, lane, domain) lead, so each combination is one range read
-- backwards, at most a page of entries (generation/queries.sql: jobs_listed). Newest means by
-- creation time, which the primary key cannot give: ordered by id, the planner would rather
-- read the primary key backwards and filter, which goes through the whole history when a
-- filter matches few jobs. A user's jobs come from the second index.
--
-- Both hold the jobs out of the queue only: the pending and generating ones are a few hundred
-- rows that the queue's own partial indexes find. So a job enters them once, when it leaves
-- the queue, never at its enqueue, claim or release, and no claim's plan can choose them.
CREATE INDEX generation_jobs_listed ON generation_jobs (status, lane, domain, created_at, id)
    WHERE status IN ('awaiting_review', 'completed', 'failed', 'cancelled');
CREATE INDEX generation_jobs_of_user ON generation_jobs (user_id, created_at, id)
    WHERE user_id IS NOT NULL AND status IN ('awaiting_review', 'completed', 'failed', 'cancelled');
