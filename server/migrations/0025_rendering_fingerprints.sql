-- Fingerprints of each rendering's files (qa.fingerprints), so that a leaked copy traces back
-- to the rendering it came from and so to the instances served it.
--
-- A rendering is fingerprinted as it is stored (never on the serve's path), and a trace first
-- fingerprints any rendering still without: those stored before this migration, or by a path
-- that does not fingerprint.

CREATE TABLE rendering_fingerprints (
    -- The primary key's hash prefix is the trace's lookup.
    hash          bigint NOT NULL,
    rendering_id  bigint NOT NULL REFERENCES mission_renderings (id),
    PRIMARY KEY (hash, rendering_id)
);

ALTER TABLE mission_renderings ADD COLUMN fingerprinted_at timestamptz;
-- A trace finds the renderings not yet fingerprinted: the index holds only those.
CREATE INDEX mission_renderings_unfingerprinted ON mission_renderings (id)
    WHERE fingerprinted_at IS NULL;

-- A trace maps the renderings it found to the instances served them.
CREATE INDEX mission_instances_by_rendering ON mission_instances (rendering_id)
    WHERE rendering_id IS NOT NULL;
