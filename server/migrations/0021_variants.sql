-- A mission's planted bugs (variants), the renderings of each that instances are made from,
-- and which variant, rendering and cohort each instance was served.
--
-- A mission is its gold and tests, proven once; each variant is one planted bug with its own
-- proof, served to at most its max_serves candidates (the domain's bug_share). A rendering is
-- what a candidate receives of a variant: its files, and the gold in the same rendering, with
-- a proof of its own. Only a 'ready' rendering is served, at most its max_serves times. The
-- identity rendering (the variant's own files, proven by the variant's proof) is every
-- variant's first; renderings of their own (renamed identifiers, say) come with max_serves 1.

CREATE TABLE mission_variants (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mission_id       bigint NOT NULL REFERENCES missions (id),
    sabotaged_files  jsonb NOT NULL,
    -- Never shown to candidates: for reviewers and graders.
    bug_summary      text NOT NULL,
    grader_hint      text NOT NULL DEFAULT '',
    -- The mission's gold run, this bug's sabotage tries, and the verdict.
    proof            jsonb NOT NULL,
    provider         text NOT NULL,
    -- The job that planted it: the mission's own job for the first variant.
    job_id           bigint,
    serve_count      integer NOT NULL DEFAULT 0,
    max_serves       integer NOT NULL CHECK (max_serves > 0),
    retired_at       timestamptz,
    retire_reason    text,
    retired_by       text,
    -- sha256 of the sabotaged files: a mission never holds the same bug twice.
    content_hash     bytea NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mission_variants_once_per_mission UNIQUE (mission_id, content_hash),
    CONSTRAINT mission_variants_serves_within_limit CHECK (serve_count <= max_serves),
    CONSTRAINT mission_variants_retired_with_reason
        CHECK ((retired_at IS NULL) = (retire_reason IS NULL))
);
-- Serving takes a mission's least-served live variant: only live ones, in that order.
CREATE INDEX mission_variants_servable ON mission_variants (mission_id, serve_count, id)
    WHERE retired_at IS NULL;
-- The QA view lists every variant of a mission.
CREATE INDEX mission_variants_of_mission ON mission_variants (mission_id, id);

CREATE TABLE mission_renderings (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    variant_id   bigint NOT NULL REFERENCES mission_variants (id),
    -- What the candidate receives: the variant's code and the tests, in this rendering.
    files        jsonb NOT NULL,
    -- The gold in this rendering: what a grader compares a candidate's fix with.
    gold_files   jsonb NOT NULL,
    -- How it was made: 'identity' is the variant's own files.
    renderer     text NOT NULL,
    proof        jsonb NOT NULL,
    -- pending: made, not yet proven; ready: proven, servable; discarded: failed its proof.
    status       text NOT NULL CHECK (status IN ('pending', 'ready', 'discarded')),
    serve_count  integer NOT NULL DEFAULT 0,
    max_serves   integer NOT NULL CHECK (max_serves > 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mission_renderings_serves_within_limit CHECK (serve_count <= max_serves)
);
-- Serving takes a ready rendering with serves left: the index holds only those.
CREATE INDEX mission_renderings_servable ON mission_renderings (variant_id, serve_count, id)
    WHERE status = 'ready' AND serve_count < max_serves;

ALTER TABLE mission_instances
    ADD COLUMN variant_id bigint,
    ADD COLUMN rendering_id bigint,
    ADD COLUMN cohort text;
-- cohort_share counts a mission's instances in one cohort: only instances with a cohort.
CREATE INDEX mission_instances_cohort ON mission_instances (mission_id, cohort)
    WHERE cohort IS NOT NULL;

-- A waiting user's instance is of the cohort their serve named; a variant job (variant_of
-- set) plants another bug in that approved mission instead of writing a new one.
ALTER TABLE generation_jobs
    ADD COLUMN cohort text,
    ADD COLUMN variant_of bigint;

-- Every mission stored before variants becomes one variant with one identity rendering. The
-- variant keeps the mission's whole serve limit: it was made and served as one bug, and the
-- domain map that names bug_share is not known here. New missions follow bug_share.
LOCK TABLE missions, mission_instances IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO mission_variants
    (mission_id, sabotaged_files, bug_summary, grader_hint, proof, provider, job_id, serve_count,
     max_serves, retired_at, retire_reason, content_hash, created_at)
SELECT id, sabotaged_files, bug_summary, grader_hint, proof, provider, job_id, serve_count,
       max_serves, CASE WHEN serve_count >= max_serves THEN coalesce(retired_at, now()) END,
       CASE WHEN serve_count >= max_serves THEN 'served ' || max_serves || ' times' END,
       sha256(convert_to(sabotaged_files::text, 'UTF8')), created_at
FROM missions
ORDER BY id;

INSERT INTO mission_renderings
    (variant_id, files, gold_files, renderer, proof, status, serve_count, max_serves, created_at)
SELECT v.id, m.sabotaged_files || m.test_files, m.gold_files, 'identity', m.proof, 'ready',
       v.serve_count, v.max_serves, v.created_at
FROM mission_variants v JOIN missions m ON m.id = v.mission_id
ORDER BY v.id;

UPDATE mission_instances i
SET variant_id = v.id, rendering_id = r.id
FROM mission_variants v JOIN mission_renderings r ON r.variant_id = v.id
WHERE v.mission_id = i.mission_id;
