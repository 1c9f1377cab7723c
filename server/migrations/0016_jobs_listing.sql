-- What the jobs page lists, newest first, without reading the history it does not show.
--
-- The page's filters (status, lane, domain) lead, so each combination is one range read
-- backwards, at most a page of entries (generation/queries.sql: jobs_listed). Newest means by
-- creation time, which the primary key cannot give: ordered by id, the planner would rather
-- read the primary key backwards and filter, which goes through the whole history when a
-- filter matches few jobs. The live jobs (pending, generating) stay out of it: the partial
-- indexes on them are what the claim, the sweeper and the counts must read, and a listing of
-- those few rows reads them too. A user's jobs, whatever their state, come from the second
-- index (generation_jobs_active_per_user holds only the live ones).
CREATE INDEX generation_jobs_listed ON generation_jobs (status, lane, domain, created_at, id)
    WHERE status NOT IN ('pending', 'generating');
CREATE INDEX generation_jobs_of_user ON generation_jobs (user_id, created_at, id)
    WHERE user_id IS NOT NULL;
