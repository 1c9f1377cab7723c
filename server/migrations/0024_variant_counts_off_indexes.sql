-- Every serve raises the serve_count of one variant and one rendering. With the count in no
-- index (nor in an index's predicate), and room left on each page, those updates are HOT: they
-- write no index entry, so a serve costs little more than before variants. A mission's live
-- variants and a variant's ready renderings are few; ordering them by count needs no index.
DROP INDEX mission_variants_servable;
CREATE INDEX mission_variants_servable ON mission_variants (mission_id) WHERE retired_at IS NULL;
-- mission_variants_once_per_mission leads with mission_id: the QA view reads a mission's
-- variants through it.
DROP INDEX mission_variants_of_mission;
DROP INDEX mission_renderings_servable;
CREATE INDEX mission_renderings_servable ON mission_renderings (variant_id)
    WHERE status = 'ready';
ALTER TABLE mission_variants SET (fillfactor = 80);
ALTER TABLE mission_renderings SET (fillfactor = 80);
