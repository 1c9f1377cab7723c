-- A call names the process that made it (as generation_jobs.worker_id does): the next
-- attempt of a job given back while its call was still being created waits for that process,
-- while it lives, to store the provider's id, instead of paying for the call again.
ALTER TABLE llm_calls ADD COLUMN worker_id text;
