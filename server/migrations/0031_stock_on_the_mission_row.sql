-- A serve reads what a mission can serve from the mission's row alone: ready_serves is what its
-- live variants' ready renderings still hold, each variant up to its own limit. Without it,
-- every serve probed every stock mission's variants (and their renderings) to find the
-- missions it may take.

ALTER TABLE missions ADD COLUMN ready_serves integer NOT NULL DEFAULT 0;

-- What one variant adds to its mission's ready_serves.
CREATE FUNCTION mission_variant_ready_serves(v mission_variants) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN v.retired_at IS NULL
                THEN least(v.rendered_serves, v.max_serves) - v.serve_count
                ELSE 0 END
$$;

-- Every change of a variant, whoever makes it (a serve, a rendering stored, a retirement, a
-- release of warmpool older than this count): the count is never out of step. Whoever
-- changes a live variant of a mission that serves may take locks the mission's row first, as
-- a serve does before its variant: this trigger writes the mission's row after the
-- variant's, and the two orders would deadlock.
CREATE FUNCTION mission_variants_count_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    added integer := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        added := mission_variant_ready_serves(NEW);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        added := added - mission_variant_ready_serves(OLD);
    END IF;
    IF added <> 0 THEN
        UPDATE missions SET ready_serves = ready_serves + added
        WHERE id = coalesce(NEW.mission_id, OLD.mission_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER mission_variants_counted_on_insert AFTER INSERT ON mission_variants
    FOR EACH ROW EXECUTE FUNCTION mission_variants_count_ready();
CREATE TRIGGER mission_variants_counted_on_update AFTER UPDATE ON mission_variants
    FOR EACH ROW EXECUTE FUNCTION mission_variants_count_ready();
CREATE TRIGGER mission_variants_counted_on_delete AFTER DELETE ON mission_variants
    FOR EACH ROW EXECUTE FUNCTION mission_variants_count_ready();

LOCK TABLE missions, mission_variants IN SHARE ROW EXCLUSIVE MODE;

UPDATE missions m SET ready_serves = counted.ready
FROM (
    SELECT v.mission_id, sum(mission_variant_ready_serves(v))::int AS ready
    FROM mission_variants v GROUP BY v.mission_id
) counted
WHERE counted.mission_id = m.id AND counted.ready <> 0;

ALTER TABLE missions ADD CONSTRAINT missions_ready_serves_counted CHECK (ready_serves >= 0);

-- Neither count in an index, nor in an index's predicate: a serve's update of its mission is
-- then a HOT update, as its variant's and its rendering's are, and writes no index entry. The
-- stock's least-served mission is found among a domain's few stock missions, never by index
-- order. Out of the stock, a mission's count no longer changes: a generated column copies it
-- for the sum of the serves ever made, and stays null (unchanged) while a mission serves.
DROP INDEX missions_servable;
CREATE INDEX missions_servable ON missions (domain)
    WHERE qa_status = 'approved' AND retired_at IS NULL;
-- Before the column is added: adding it rewrites the table, leaving room on each page.
ALTER TABLE missions SET (fillfactor = 80);
ALTER TABLE missions ADD COLUMN out_of_stock_serve_count integer
    GENERATED ALWAYS AS (
        CASE WHEN qa_status <> 'approved' OR retired_at IS NOT NULL THEN serve_count END
    ) STORED;
DROP INDEX missions_out_of_stock_serves;
CREATE INDEX missions_out_of_stock_serves ON missions (domain) INCLUDE (out_of_stock_serve_count)
    WHERE qa_status <> 'approved' OR retired_at IS NOT NULL;
