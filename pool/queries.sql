-- Queries of serving: the missions' serve counts and retirement, and mission_instances.

-- name: pool_serve_round
-- One round of a serve (migration 0032 has the statement and its argument): the instance made,
-- or no row when the round served nothing and holds nothing.
SELECT * FROM pool_serve_round(
    $1::text[], $2::text, $3::text, $4::timestamptz, $5::bigint, $6::bigint, $7::text, $8::int[],
    $9::bigint
);

-- name: job_waiting_for_mission
-- Who an interactive job serves once its mission is approved: the user, their track and
-- cohort, and the key that made the job.
SELECT domain, user_id, track, cohort, created_by FROM generation_jobs WHERE id = $1::bigint;

-- name: mission_least_served_id
-- When every eligible mission is locked by concurrent serves, the one to wait for: one of
-- the least served, at random, so that many waiters spread over them instead of queueing
-- on the same one. Eligible as a serve's round has it (pool_serve_round).
SELECT m.id FROM missions m
WHERE m.domain = ANY($1::text[]) AND m.qa_status = 'approved' AND m.retired_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
  )
  AND ($3::text IS NULL
       OR ($4::int[])[array_position($1::text[], m.domain)] IS NULL
       OR (SELECT count(*) FROM mission_instances i
           WHERE i.mission_id = m.id AND i.cohort = $3::text)
          < ($4::int[])[array_position($1::text[], m.domain)])
  AND m.ready_serves > 0
ORDER BY m.serve_count, random()
LIMIT 1;

-- name: instance_by_id
-- With $2, only an instance that key made.
SELECT id, mission_id, variant_id, user_id, cohort, track, domain, language, title, brief,
       files, serve_number, created_at
FROM mission_instances
WHERE id = $1::bigint AND ($2::bigint IS NULL OR created_by = $2::bigint);

-- name: instances_of_user
SELECT id, mission_id, variant_id, user_id, cohort, track, domain, language, title, brief,
       files, serve_number, created_at
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
-- What the stock can serve, per mission up to the serves it has left: now (servable), the
-- serves its live variants' ready renderings hold; in all (stock), the serves its live
-- variants have left, but of a variant whose rendering jobs failed $4 times only what is
-- rendered. Only a variant not yet fully rendered is looked up among the rendering jobs.
SELECT d.domain, stock.approved, stock.remaining_serves, stock.servable_serves,
       stock.stock_serves, stock.live_variants, stock.renderings_ready,
       review.awaiting_review, reviewed.approvals, reviewed.rejections,
       reviewed.lead_time_p90_s, reviewed.lead_time_samples
FROM unnest($1::text[]) AS d(domain)
CROSS JOIN LATERAL (
    SELECT count(*) AS approved, coalesce(sum(m.max_serves - m.serve_count), 0) AS remaining_serves,
           coalesce(sum(least(m.max_serves - m.serve_count, shares.ready)), 0)::bigint
               AS servable_serves,
           coalesce(sum(least(m.max_serves - m.serve_count, shares.renderable)), 0)::bigint
               AS stock_serves,
           coalesce(sum(shares.variants), 0)::bigint AS live_variants,
           coalesce(sum(shares.renderings), 0)::bigint AS renderings_ready
    FROM missions m
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(least(v.max_serves, v.rendered_serves) - v.serve_count), 0) AS ready,
               coalesce(sum(CASE
                   WHEN v.rendered_serves >= v.max_serves
                     OR (SELECT count(*) FROM generation_jobs j  -- generation_jobs_rendering_of
                         WHERE j.rendering_of = v.id AND j.status = 'failed') < $4::int
                   THEN v.max_serves
                   ELSE v.rendered_serves
               END - v.serve_count), 0) AS renderable,
               count(*) AS variants,
               -- A variant without code has its one identity rendering; with code, a ready
               -- rendering holds one serve.
               coalesce(sum(CASE WHEN m.language = 'none' THEN 1
                                 ELSE v.rendered_serves - v.serve_count END), 0) AS renderings
        FROM mission_variants v  -- the mission_variants_servable index
        WHERE v.mission_id = m.id AND v.retired_at IS NULL
    ) shares
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

-- name: missions_short_of_variants
-- The approved missions of domain $1 whose live variants, with the variant jobs under way
-- (each worth a variant of $2 serves), hold fewer serves than the mission has left, and how
-- many variants each still lacks; those with the fewest serves ready first, as they run out
-- first. At most $3. A mission whose variant jobs failed $4 times (its saboteur finds no new
-- bug that its tests catch, say) is ordered no more: every order would fail again, and with a
-- model each would be paid for. Retention forgets those failures with the jobs.
SELECT m.id,
       ceil((m.max_serves - m.serve_count - shares.serves_left)::numeric / $2::int)::int
           - jobs.under_way AS lacking
FROM missions m
CROSS JOIN LATERAL (
    SELECT coalesce(sum(v.max_serves - v.serve_count), 0) AS serves_left
    FROM mission_variants v  -- the mission_variants_servable index
    WHERE v.mission_id = m.id AND v.retired_at IS NULL
) shares
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE j.status IN ('pending', 'generating')) AS under_way,
           count(*) FILTER (WHERE j.status = 'failed') AS failed
    FROM generation_jobs j  -- the generation_jobs_variant_of index
    WHERE j.variant_of = m.id
) jobs
WHERE m.domain = $1::text AND m.qa_status = 'approved' AND m.retired_at IS NULL
  AND shares.serves_left + jobs.under_way * $2::int < m.max_serves - m.serve_count
  AND jobs.failed < $4::int
ORDER BY shares.serves_left, m.id
LIMIT $3::int;

-- name: variants_short_of_renderings
-- The live variants of the approved missions of domain $1 whose ready renderings, with the
-- rendering jobs under way (each worth $2 renderings), hold fewer serves than the variant may
-- still be served (up to its mission's serves left); those with the fewest rendered serves left
-- first, in the least-served missions first, as serving takes those next. At most $3. A
-- variant whose rendering jobs failed $4 times is ordered no more (its renderings keep failing
-- their proof, or its mission has none left to make); the pool's supply stops counting its
-- serves, so the forecast orders missions instead.
SELECT v.id
FROM missions m
JOIN mission_variants v  -- the mission_variants_servable index
  ON v.mission_id = m.id AND v.retired_at IS NULL
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE j.status IN ('pending', 'generating')) AS under_way,
           count(*) FILTER (WHERE j.status = 'failed') AS failed
    FROM generation_jobs j  -- the generation_jobs_rendering_of index
    WHERE j.rendering_of = v.id
) jobs
WHERE m.domain = $1::text AND m.qa_status = 'approved' AND m.retired_at IS NULL
  AND v.rendered_serves < v.max_serves
  AND v.rendered_serves - v.serve_count + jobs.under_way * $2::int
      < least(v.max_serves - v.serve_count, m.max_serves - m.serve_count)
  AND jobs.failed < $4::int
ORDER BY v.rendered_serves - v.serve_count, m.serve_count, v.id
LIMIT $3::int;

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
-- together hold every mission once, the latter with its count (out_of_stock_serve_count).
SELECT d.domain,
       (SELECT coalesce(sum(m.serve_count), 0) FROM missions m
        WHERE m.domain = d.domain AND m.qa_status = 'approved' AND m.retired_at IS NULL)
     + (SELECT coalesce(sum(m.out_of_stock_serve_count), 0) FROM missions m
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

-- name: instance_with_mission_for_grading
-- An instance with what grading and graders need, in the instance's own rendering: its visible
-- tests, its hidden tests and its gold (an instance without a rendering, made before
-- renderings, has the mission's), its variant's bug, and the hidden tests' ids as the gold's
-- proof found them (renaming keeps test names: a rendering's proof checks that the same hidden
-- tests ran). With $2, only an instance that key made.
SELECT i.id, i.mission_id, i.variant_id, i.user_id, i.cohort, i.track, i.domain, i.language,
       i.title, i.brief, i.files, i.serve_number, i.created_at,
       coalesce(r.test_files, m.test_files) AS test_files,
       coalesce(r.hidden_test_files, m.hidden_test_files) AS hidden_test_files,
       coalesce(r.gold_files, m.gold_files) AS gold_files,
       coalesce(v.bug_summary, m.bug_summary) AS bug_summary,
       coalesce(v.grader_hint, m.grader_hint) AS grader_hint,
       m.proof->'hidden_gold' AS hidden_gold
FROM mission_instances i
JOIN missions m ON m.id = i.mission_id
LEFT JOIN mission_variants v ON v.id = i.variant_id
LEFT JOIN mission_renderings r ON r.id = i.rendering_id
WHERE i.id = $1::bigint AND ($2::bigint IS NULL OR i.created_by = $2::bigint);
