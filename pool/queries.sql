-- Queries of serving: the missions' serve counts and retirement, and mission_instances.

-- name: mission_serve_least_served
-- One statement: pick the least-served approved, unretired mission of the allowed domains
-- that this user does not have yet, count the serve, retire the mission when the count
-- reaches its limit, and snapshot the candidate's instance.
-- Only a mission at the lowest committed count may be taken, so counts stay within one of
-- each other however many serves run at once; SKIP LOCKED spreads concurrent serves over
-- the missions at that level instead of queueing them on one row. The conditions are
-- re-checked on the locked row, and the CHECK on serve_count <= max_serves makes an
-- over-serve impossible whatever happens. With $5 set: only that mission, whose lock the
-- caller already holds after waiting for it.
WITH eligible AS (
    SELECT m.id, m.serve_count FROM missions m
    WHERE m.domain = ANY($1::text[])
      AND m.qa_status = 'approved' AND m.retired_at IS NULL  -- the missions_servable index
      AND NOT EXISTS (
          SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
      )
),
chosen AS (
    SELECT m.id FROM missions m
    -- A few ids by primary key, however many missions the table holds.
    WHERE m.id = ANY (ARRAY(
              SELECT id FROM eligible
              WHERE serve_count = (SELECT min(serve_count) FROM eligible)
          ))
      -- m's own count, not eligible's: the lock re-checks it on the row's latest version.
      AND m.serve_count = (SELECT min(serve_count) FROM eligible)
      AND ($5::bigint IS NULL OR m.id = $5::bigint)
    ORDER BY m.id
    LIMIT 1
    FOR UPDATE OF m SKIP LOCKED
),
served AS (
    UPDATE missions m
    SET serve_count = m.serve_count + 1,
        retired_at = CASE WHEN m.serve_count + 1 >= m.max_serves
                          THEN coalesce($4::timestamptz, now()) END,
        retire_reason = CASE WHEN m.serve_count + 1 >= m.max_serves
                             THEN 'served ' || m.max_serves || ' times' END
    FROM chosen
    WHERE m.id = chosen.id AND m.qa_status = 'approved' AND m.retired_at IS NULL
    RETURNING m.id, m.domain, m.language, m.title, m.brief, m.sabotaged_files, m.test_files,
              m.serve_count
)
INSERT INTO mission_instances
    (mission_id, user_id, track, domain, language, title, brief, files, serve_number, created_at,
     created_by)
SELECT id, $2::text, $3::text, domain, language, title, brief, sabotaged_files || test_files,
       serve_count, coalesce($4::timestamptz, now()), $6::bigint
FROM served
RETURNING id, mission_id, user_id, track, domain, language, title, brief, files, serve_number,
          created_at;

-- name: mission_serve_to_waiting_user
-- When a mission is approved, the user whose interactive job ($2) asked for it gets it, counted
-- as a serve like any other (and retiring it if that was its last), made by the key that made
-- the job. A user who has it already is not counted again: a serve count is the mission's
-- instances. The caller's transaction holds the mission's row (it approved or stored the
-- mission), so no other serve of it runs meanwhile.
WITH job AS (
    SELECT user_id, track, created_by FROM generation_jobs WHERE id = $2::bigint
),
served AS (
    UPDATE missions m
    SET serve_count = m.serve_count + 1,
        retired_at = CASE WHEN m.serve_count + 1 >= m.max_serves THEN now() END,
        retire_reason = CASE WHEN m.serve_count + 1 >= m.max_serves
                             THEN 'served ' || m.max_serves || ' times' END
    FROM job
    WHERE m.id = $1::bigint AND m.qa_status = 'approved' AND m.retired_at IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = job.user_id
      )
    RETURNING m.id, m.domain, m.language, m.title, m.brief, m.sabotaged_files, m.test_files,
              m.serve_count
)
INSERT INTO mission_instances
    (mission_id, user_id, track, domain, language, title, brief, files, serve_number, created_by)
SELECT served.id, job.user_id, job.track, domain, language, title, brief,
       sabotaged_files || test_files, serve_count, job.created_by
FROM served, job
ON CONFLICT ON CONSTRAINT mission_instances_once_per_user DO NOTHING
RETURNING id, mission_id, user_id, track, domain, language, title, brief, files, serve_number,
          created_at;

-- name: mission_least_served_id
-- When every eligible mission is locked by concurrent serves, the one to wait for: one of
-- the least served, at random, so that many waiters spread over them instead of queueing
-- on the same one.
SELECT m.id FROM missions m
WHERE m.domain = ANY($1::text[]) AND m.qa_status = 'approved' AND m.retired_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
  )
ORDER BY m.serve_count, random()
LIMIT 1;

-- name: mission_lock_waiting
-- Waits for the serve holding this one row to commit, then holds it for the caller's serve.
-- One row only: a waiter holds no other mission's lock, so waiters can never deadlock.
SELECT id FROM missions WHERE id = $1::bigint FOR UPDATE;

-- name: instance_by_id
-- With $2, only an instance that key made.
SELECT id, mission_id, user_id, track, domain, language, title, brief, files, serve_number,
       created_at
FROM mission_instances
WHERE id = $1::bigint AND ($2::bigint IS NULL OR created_by = $2::bigint);

-- name: instances_of_user
SELECT id, mission_id, user_id, track, domain, language, title, brief, files, serve_number,
       created_at
FROM mission_instances
WHERE user_id = $1::text AND ($3::bigint IS NULL OR created_by = $3::bigint)
ORDER BY created_at DESC, id DESC
LIMIT $2::int;

-- name: domains_by_stock
-- Where an interactive generation helps most: the allowed domain with the fewest serves
-- left in approved missions plus missions under way, then the map's order.
SELECT d.name
FROM unnest($1::text[]) WITH ORDINALITY AS d(name, position)
ORDER BY (
    SELECT coalesce(sum(m.max_serves - m.serve_count), 0) FROM missions m
    WHERE m.domain = d.name AND m.qa_status = 'approved' AND m.retired_at IS NULL
) + (
    SELECT count(*) FROM missions m WHERE m.domain = d.name AND m.qa_status = 'awaiting_review'
), d.position
LIMIT 1;

-- name: missions_by_domain
-- Per domain: the approved, unretired stock and its serves left (the missions_servable
-- index), the missions awaiting review that can still be approved, the reviews in [$2, $3],
-- and the p90 lead time of the missions approved then: from their job's creation (read from
-- generation_jobs, whose retention outlasts the window) to their approval. The reviews are
-- read from the two indexes that together hold every mission once, missions_servable and
-- missions_out_of_stock, each by its range of review times: never the domain's whole history.
SELECT d.domain, stock.approved, stock.remaining_serves, review.awaiting_review,
       reviewed.approvals, reviewed.rejections, reviewed.lead_time_p90_s,
       reviewed.lead_time_samples
FROM unnest($1::text[]) AS d(domain)
CROSS JOIN LATERAL (
    SELECT count(*) AS approved, coalesce(sum(m.max_serves - m.serve_count), 0) AS remaining_serves
    FROM missions m
    WHERE m.domain = d.domain AND m.qa_status = 'approved' AND m.retired_at IS NULL
) stock
CROSS JOIN LATERAL (
    SELECT count(*) AS awaiting_review FROM missions m
    WHERE m.domain = d.domain AND m.qa_status = 'awaiting_review' AND m.retired_at IS NULL
) review
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.qa_status = 'approved') AS approvals,
           count(*) FILTER (WHERE m.qa_status = 'rejected') AS rejections,
           percentile_cont(0.9) WITHIN GROUP (
               ORDER BY extract(epoch FROM m.reviewed_at - j.created_at)
           ) FILTER (WHERE m.qa_status = 'approved') AS lead_time_p90_s,
           count(j.id) FILTER (WHERE m.qa_status = 'approved') AS lead_time_samples
    FROM (
        SELECT m.qa_status, m.reviewed_at, m.job_id FROM missions m
        WHERE m.domain = d.domain AND m.qa_status = 'approved' AND m.retired_at IS NULL
          AND m.reviewed_at BETWEEN $2::timestamptz AND $3::timestamptz
        UNION ALL
        SELECT m.qa_status, m.reviewed_at, m.job_id FROM missions m
        WHERE m.domain = d.domain AND (m.qa_status <> 'approved' OR m.retired_at IS NOT NULL)
          AND m.reviewed_at BETWEEN $2::timestamptz AND $3::timestamptz
    ) m
    LEFT JOIN generation_jobs j ON j.id = m.job_id
) reviewed;

-- name: serves_by_domain
-- Per domain: the serves (instances made) in ($2, $4] and in ($3, $4], the two demand windows.
-- Counted domain by domain (LATERAL), so that each count reads its window of the (domain,
-- created_at) index, in a generic plan too, and never the whole table.
SELECT d.domain, windows.serves_short, windows.serves_long
FROM unnest($1::text[]) AS d(domain)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE i.created_at > $2::timestamptz) AS serves_short,
           count(*) AS serves_long
    FROM mission_instances i
    WHERE i.domain = d.domain AND i.created_at > $3::timestamptz
      AND i.created_at <= $4::timestamptz
) windows;

-- name: serves_by_domain_ever
-- Per domain, every serve ever made, without reading the instances: each serve adds one to its
-- mission's serve_count in the statement that makes the instance, so the missions' counts sum
-- to the instances. Summed over missions_servable and missions_out_of_stock_serves, which
-- together hold every mission once, each with its count.
SELECT d.domain,
       (SELECT coalesce(sum(m.serve_count), 0) FROM missions m
        WHERE m.domain = d.domain AND m.qa_status = 'approved' AND m.retired_at IS NULL)
     + (SELECT coalesce(sum(m.serve_count), 0) FROM missions m
        WHERE m.domain = d.domain AND (m.qa_status <> 'approved' OR m.retired_at IS NOT NULL))
       AS serves
FROM unnest($1::text[]) AS d(domain);

-- name: serves_by_domain_and_hour
-- Per domain and UTC clock hour, the serves of the $2 hours up to $3, its own hour included;
-- an hour without a serve is there with 0. Each hour reads its range of the (domain,
-- created_at) index.
SELECT d.domain, h.hour, count(i.id) AS serves
FROM unnest($1::text[]) AS d(domain)
CROSS JOIN generate_series(
    date_trunc('hour', $3::timestamptz, 'UTC') - ($2::int - 1) * interval '1 hour',
    date_trunc('hour', $3::timestamptz, 'UTC'),
    interval '1 hour'
) AS h(hour)
LEFT JOIN mission_instances i
  ON i.domain = d.domain AND i.created_at >= h.hour AND i.created_at < h.hour + interval '1 hour'
 AND i.created_at <= $3::timestamptz
GROUP BY d.domain, h.hour
ORDER BY h.hour;

-- name: replenish_leader_try_lock
-- One replenishment pass at a time across all processes: a pass that cannot take this
-- transaction lock is skipped, as another process is counting the same pool right now.
-- advisory lock: replenish_leader (core/locks.py)
SELECT pg_try_advisory_xact_lock(4, 0);
