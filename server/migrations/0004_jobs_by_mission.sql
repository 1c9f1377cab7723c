-- Settling the jobs that wait on a mission's review finds them by mission.
CREATE INDEX generation_jobs_awaiting_review ON generation_jobs (mission_id)
    WHERE status = 'awaiting_review';
