-- In a mission with code, every rendering is served to one instance, so no two instances of a
-- mission have the same files; the identity rendering too. Renderings of their own (renamed
-- identifiers) are made ahead of demand by rendering jobs and stored with the whole mission in
-- their rendering: its visible and hidden tests, which grading runs, and the gold.

ALTER TABLE mission_renderings
    ADD COLUMN mission_id bigint,
    -- The rendering's number among the mission's (generation.renderings); null: the identity.
    ADD COLUMN number bigint,
    ADD COLUMN test_files jsonb,
    ADD COLUMN hidden_test_files jsonb;

-- The serves that the variant's ready renderings hold, served or not. Every serve of a variant
-- is a serve of one of them, so what its renderings have left is rendered_serves - serve_count,
-- read from the variant alone; it grows as renderings are stored, never on the serve's path.
ALTER TABLE mission_variants ADD COLUMN rendered_serves integer NOT NULL DEFAULT 0;

-- A rendering job renders one variant (mission_variants.id); the replenisher counts, per
-- variant, those under way and those that failed, through this index of rendering jobs alone.
ALTER TABLE generation_jobs ADD COLUMN rendering_of bigint;
CREATE INDEX generation_jobs_rendering_of ON generation_jobs (rendering_of, status)
    WHERE rendering_of IS NOT NULL;

LOCK TABLE missions, mission_variants, mission_renderings IN SHARE ROW EXCLUSIVE MODE;

UPDATE mission_renderings r
SET mission_id = m.id, test_files = m.test_files, hidden_test_files = m.hidden_test_files
FROM mission_variants v JOIN missions m ON m.id = v.mission_id
WHERE v.id = r.variant_id;

-- An identity rendering of a mission with code has served its last: the serves left of its
-- variant wait for renderings of their own.
UPDATE mission_renderings r
SET max_serves = greatest(r.serve_count, 1)
FROM missions m
WHERE m.id = r.mission_id AND m.language <> 'none' AND r.renderer = 'identity';

UPDATE mission_variants v
SET rendered_serves = ready.serves
FROM (
    SELECT variant_id, sum(max_serves)::int AS serves FROM mission_renderings
    WHERE status = 'ready' GROUP BY variant_id
) ready
WHERE ready.variant_id = v.id;

ALTER TABLE mission_renderings
    ALTER COLUMN mission_id SET NOT NULL,
    ALTER COLUMN test_files SET NOT NULL,
    ALTER COLUMN hidden_test_files SET NOT NULL;
ALTER TABLE mission_variants
    ADD CONSTRAINT mission_variants_served_from_renderings CHECK (serve_count <= rendered_serves);

-- Two rendering jobs of one mission (of two of its variants) never store the same number: a
-- leaked copy then names its rendering, not one of two that share its names.
CREATE UNIQUE INDEX mission_renderings_number_once_per_mission
    ON mission_renderings (mission_id, number) WHERE number IS NOT NULL;
