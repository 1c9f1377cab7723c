-- Queries of the pool's missions (missions): storing proven missions and reviewing them.
-- Every review transition is a conditional UPDATE on the expected state: zero rows means the
-- mission was not in that state (another reviewer won, or it was never there), and the
-- caller writes nothing.


-- name: mission_insert_unless_duplicate
-- The content hash's unique constraint decides between two generations of the same mission,
-- concurrent ones too: the second one inserts nothing and gets no id back.
-- A mission approved by its proof ($18 = 'approved') is reviewed now, by 'proof' ($19).
INSERT INTO missions (
    domain, kind, language, title, brief, gold_files, test_files, sabotaged_files,
    bug_summary, grader_hint, proof, provider, prompt_version, job_id, requested_by,
    max_serves, content_hash, qa_status, reviewed_by, reviewed_at, review_note,
    hidden_test_files
)
VALUES (
    $1::text, $2::text, $3::text, $4::text, $5::text, $6::jsonb, $7::jsonb, $8::jsonb,
    $9::text, $10::text, $11::jsonb, $12::text, $13::text, $14::bigint, $15::text,
    $16::int, $17::bytea, $18::text, $19::text,
    CASE WHEN $19::text IS NULL THEN NULL ELSE now() END, $20::text, $21::jsonb
)
ON CONFLICT ON CONSTRAINT missions_content_hash_unique DO NOTHING
RETURNING id;

-- name: missions_list
-- The review queue: missions a waiting user asked for (an interactive job) first, then the
-- oldest first. The limit bounds an answer as the history of reviewed missions grows.
SELECT id, domain, kind, language, title, qa_status, proof->>'verdict' AS verdict,
       requested_by, serve_count, max_serves, retired_at, reviewed_by, reviewed_at, created_at
FROM missions
WHERE qa_status = $1::text AND ($2::text IS NULL OR domain = $2::text)
ORDER BY requested_by IS NULL, created_at, id
LIMIT $3::int;

-- name: mission_by_id
SELECT * FROM missions WHERE id = $1::bigint;

-- name: mission_approve_if_awaiting_review
-- Two reviewers at once: the second one's UPDATE waits on the first one's row lock, then
-- re-reads the row, finds it reviewed, and updates nothing. A retired mission is never
-- served, so approving it would promise a waiting user an instance that cannot be made.
UPDATE missions
SET qa_status = 'approved', reviewed_by = $2::text, reviewed_at = now(), review_note = $3::text
WHERE id = $1::bigint AND qa_status = 'awaiting_review' AND retired_at IS NULL
RETURNING *;

-- name: mission_reject_if_awaiting_review
UPDATE missions
SET qa_status = 'rejected', reviewed_by = $2::text, reviewed_at = now(), review_note = $3::text
WHERE id = $1::bigint AND qa_status = 'awaiting_review'
RETURNING *;

-- name: mission_retire_unless_retired
-- Serving picks only rows with retired_at IS NULL (the missions_servable index), under a row
-- lock: once this commits, no serve can take the mission again.
UPDATE missions
SET retired_at = now(), retired_by = $2::text, retire_reason = $3::text
WHERE id = $1::bigint AND retired_at IS NULL
RETURNING *;

-- name: variant_insert_unless_duplicate
-- A mission's bug with its identity rendering: the variant's own files and the mission's tests,
-- proven by the variant's proof, ready at once and served $9 times (once in a mission with
-- code, where each further serve waits for a rendering of its own). The unique (mission,
-- content hash) constraint turns the same bug planted twice into no row.
WITH variant AS (
    INSERT INTO mission_variants
        (mission_id, sabotaged_files, bug_summary, grader_hint, proof, provider, job_id,
         max_serves, rendered_serves, content_hash)
    VALUES ($1::bigint, $2::jsonb, $3::text, $4::text, $5::jsonb, $6::text, $7::bigint, $8::int,
            $9::int, sha256(convert_to($2::jsonb::text, 'UTF8')))
    ON CONFLICT ON CONSTRAINT mission_variants_once_per_mission DO NOTHING
    RETURNING id, sabotaged_files, proof, rendered_serves
),
rendering AS (
    INSERT INTO mission_renderings
        (variant_id, mission_id, files, gold_files, test_files, hidden_test_files, renderer,
         proof, status, max_serves)
    SELECT variant.id, m.id, variant.sabotaged_files || m.test_files, m.gold_files,
           m.test_files, m.hidden_test_files, 'identity', variant.proof, 'ready',
           variant.rendered_serves
    FROM variant JOIN missions m ON m.id = $1::bigint
)
SELECT id FROM variant;

-- name: variants_of_mission
-- With the mission's gold, which each variant's diff is read against.
SELECT v.id, v.bug_summary, v.grader_hint, v.sabotaged_files, m.gold_files, v.proof, v.provider,
       v.serve_count, v.max_serves, v.retired_at, v.retire_reason, v.retired_by, v.created_at
FROM mission_variants v JOIN missions m ON m.id = v.mission_id
WHERE v.mission_id = $1::bigint
ORDER BY v.id;

-- name: mission_lock_before_its_variant
-- A change of a live variant locks its mission's row first, as a serve does before it locks
-- the variant: the trigger of migration 0031 then writes the mission's ready_serves, in the
-- order serves take the two rows, so the two never deadlock.
SELECT id FROM missions WHERE id = $1::bigint FOR NO KEY UPDATE;

-- name: variant_retire_unless_retired
-- Serving picks only variants with retired_at IS NULL, locking the one it takes: once this
-- commits, no serve can take the variant again. The caller holds the mission's row
-- (mission_lock_before_its_variant).
UPDATE mission_variants
SET retired_at = now(), retired_by = $3::text, retire_reason = $4::text
WHERE id = $2::bigint AND mission_id = $1::bigint AND retired_at IS NULL
RETURNING id;

-- name: mission_to_vary
-- An approved, unretired mission with the sabotaged files of every bug it holds.
SELECT m.id, m.title, m.brief, m.gold_files, m.test_files, m.hidden_test_files, m.proof,
       m.max_serves, (SELECT coalesce(jsonb_agg(v.sabotaged_files ORDER BY v.id), '[]')
        FROM mission_variants v WHERE v.mission_id = m.id) AS known_bugs
FROM missions m
WHERE m.id = $1::bigint AND m.qa_status = 'approved' AND m.retired_at IS NULL;

-- name: renderings_unfingerprinted
-- A batch of renderings no trace has fingerprinted yet (the mission_renderings_unfingerprinted
-- index), with the files a candidate receives of each.
SELECT id, files FROM mission_renderings
WHERE fingerprinted_at IS NULL
ORDER BY id
LIMIT $1::int;

-- name: renderings_of_variant_unfingerprinted
-- The renderings a variant's store just added (mission_renderings_servable's variant prefix).
SELECT id, files FROM mission_renderings
WHERE variant_id = $1::bigint AND fingerprinted_at IS NULL
ORDER BY id;

-- name: rendering_fingerprints_insert
-- Two traces may fingerprint one rendering at once: the same rows, so the second adds none.
INSERT INTO rendering_fingerprints (hash, rendering_id)
SELECT hash, $1::bigint FROM unnest($2::bigint[]) AS hash
ON CONFLICT DO NOTHING;

-- name: rendering_mark_fingerprinted
UPDATE mission_renderings SET fingerprinted_at = now()
WHERE id = $1::bigint AND fingerprinted_at IS NULL;

-- name: renderings_sharing_fingerprints
-- Each rendering holding at least $2 of the text's fingerprints, with how many it holds and
-- their weight: a fingerprint held by n renderings weighs 1/n, so what every rendering of a
-- mission shares says the mission, and what one rendering alone holds says that rendering.
-- Both reads of rendering_fingerprints go through its primary key's hash prefix.
WITH hits AS (
    SELECT f.hash, f.rendering_id FROM rendering_fingerprints f WHERE f.hash = ANY($1::bigint[])
),
holders AS (
    SELECT hash, count(*) AS renderings FROM hits GROUP BY hash
)
SELECT h.rendering_id, count(*) AS shared, sum(1.0 / holders.renderings)::float8 AS weight
FROM hits h JOIN holders USING (hash)
GROUP BY h.rendering_id
HAVING count(*) >= $2::int
ORDER BY weight DESC, h.rendering_id
LIMIT $3::int;

-- name: instances_of_renderings
-- The instances served the renderings a trace found (the mission_instances_by_rendering index).
SELECT i.id, i.mission_id, i.variant_id, i.rendering_id, i.user_id, i.cohort, i.created_at
FROM mission_instances i
WHERE i.rendering_id = ANY($1::bigint[])
ORDER BY i.id;

-- name: variant_to_render
-- What a rendering job needs of a live variant of a served mission: the mission's files and
-- the variant's, its proof (the runs a rendering's must match), how many renderings it lacks
-- (its serves beyond what its ready renderings hold, up to the mission's serves left) and the
-- numbers the mission's renderings hold already (the number_once_per_mission index's prefix).
SELECT v.id, v.mission_id, v.sabotaged_files, v.proof, m.gold_files, m.test_files,
       m.hidden_test_files,
       least(v.max_serves - v.rendered_serves, m.max_serves - m.serve_count) AS lacking,
       ARRAY(SELECT r.number FROM mission_renderings r
             WHERE r.mission_id = m.id AND r.number IS NOT NULL) AS numbers_taken
FROM mission_variants v JOIN missions m ON m.id = v.mission_id
WHERE v.id = $1::bigint AND v.retired_at IS NULL
  AND m.qa_status = 'approved' AND m.retired_at IS NULL;

-- name: rendering_insert_unless_number_taken
-- A proven rendering, served once ($9 'ready'), or kept with the proof it failed ($9
-- 'discarded', never served, nothing to trace). Two jobs of one mission may draw the same
-- number: the unique index lets the first one have it, and the second stores nothing.
INSERT INTO mission_renderings
    (variant_id, mission_id, number, files, gold_files, test_files, hidden_test_files, renderer,
     proof, status, max_serves, fingerprinted_at)
VALUES ($1::bigint, $2::bigint, $3::bigint, $4::jsonb, $5::jsonb, $6::jsonb, $7::jsonb, 'renamed',
        $8::jsonb, $9::text, 1, CASE WHEN $9::text = 'discarded' THEN now() END)
ON CONFLICT (mission_id, number) WHERE number IS NOT NULL DO NOTHING
RETURNING id;

-- name: variant_add_rendered_serves
-- The variant's ready renderings hold $2 more serves: serving may take them from now on. The
-- caller holds the mission's row (mission_lock_before_its_variant).
UPDATE mission_variants SET rendered_serves = rendered_serves + $2::int WHERE id = $1::bigint;
