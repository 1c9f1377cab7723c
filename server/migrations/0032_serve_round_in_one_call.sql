-- A serve's round as one function: the serve statement (its argument is here, beside it), with
-- its two parts that used to cost round trips of their own. Planned once per session, as a
-- generic plan: planning the statement anew for each serve cost more than running it. And a
-- round that serves nothing rolls back what it locked (a mission waited for, a row that failed
-- its re-check) in a subtransaction of its own, not a savepoint the caller sets and releases.
-- And a serve counts the ready serve it takes on the mission row it writes anyway, so the
-- trigger of migration 0031 leaves that to it: one update of the mission per serve, not two.
-- Only serves made by this function: a serve of an older release (during a rolling deploy)
-- does not count it, and the trigger goes on counting those.
--
-- One statement: pick the least-served approved, unretired mission of the allowed domains
-- that this user does not have yet (and, with a cohort $7, that fewer than its domain's
-- cohort_share $8 of that cohort have), then its least-served live variant, then a ready
-- rendering of that variant with serves left; count the serve on all three, retire the
-- variant and the mission when their counts reach their limits, and snapshot the candidate's
-- instance from the rendering.
-- Only a mission at the lowest committed count may be taken, so counts stay within one of
-- each other however many serves run at once; SKIP LOCKED spreads concurrent serves over
-- the missions at that level instead of queueing them on one row. The conditions are
-- re-checked on the locked row, and the CHECKs on serve_count <= max_serves make an
-- over-serve impossible whatever happens. With $5 set: only that mission, whose lock the
-- caller already holds after waiting for it. With $9 set: only that mission, at whatever count
-- (a waiting user's own, just approved or stored in the caller's transaction, which holds its
-- row so no other serve of it runs meanwhile).
-- Every change that matters to a serve holds the mission's row and changes it: another serve
-- raises its serve_count; a reviewer's retirement of a variant, or a rendering job's store,
-- changes its ready_serves (migration 0031). So a mission whose two counts pass the re-check
-- on its locked row has had no such change commit since this statement's snapshot: its
-- instances (the user's, the cohort's), its variants and its renderings as read here are
-- current, and they need no lock of their own before they are written.
--
-- $5 set: the caller waited for that mission (mission_least_served_id); the round waits for
-- its lock, then serves it if it still is the least served. A round that serves nothing, or
-- meets the same user served at once by another serve, returns no row and holds nothing.
CREATE FUNCTION pool_serve_round(
    domains text[],
    user_id text,
    track text,
    at timestamptz,
    waited_for bigint,
    created_by bigint,
    cohort text,
    cohort_shares int[],
    only_mission bigint
)
RETURNS SETOF mission_instances
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET warmpool.serve_counts_ready_serves = 'on'
AS $$
#variable_conflict use_column
DECLARE
    made mission_instances;
BEGIN
    BEGIN
        IF $5 IS NOT NULL THEN
            -- One row only: a waiter holds no other mission's lock, so waiters never deadlock.
            PERFORM 1 FROM missions WHERE id = $5 FOR NO KEY UPDATE;
        END IF;
        WITH eligible AS (
            SELECT m.id, m.serve_count, m.ready_serves FROM missions m
            WHERE m.domain = ANY($1::text[])
              AND m.qa_status = 'approved' AND m.retired_at IS NULL  -- the missions_servable index
              AND ($9::bigint IS NULL OR m.id = $9::bigint)
              AND NOT EXISTS (
                  SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
              )
              AND ($7::text IS NULL
                   OR ($8::int[])[array_position($1::text[], m.domain)] IS NULL
                   OR (SELECT count(*) FROM mission_instances i  -- the mission_instances_cohort index
                       WHERE i.mission_id = m.id AND i.cohort = $7::text)
                      < ($8::int[])[array_position($1::text[], m.domain)])
              AND m.ready_serves > 0  -- some live variant has a ready rendering with serves left
        ),
        chosen AS (
            SELECT m.id FROM missions m
            -- A few ids by primary key, however many missions the table holds.
            WHERE m.id = ANY (ARRAY(
                      SELECT id FROM eligible
                      WHERE serve_count = (SELECT min(serve_count) FROM eligible)
                  ))
              -- m's own counts, not eligible's: the lock re-checks them on the row's latest version.
              AND m.serve_count = (SELECT min(serve_count) FROM eligible)
              AND m.ready_serves = (SELECT e.ready_serves FROM eligible e WHERE e.id = m.id)
              AND ($5::bigint IS NULL OR m.id = $5::bigint)
            ORDER BY m.id
            LIMIT 1
            FOR NO KEY UPDATE OF m SKIP LOCKED
        ),
        variant AS (
            -- What a variant's ready renderings have left is rendered_serves - serve_count.
            SELECT v.id FROM mission_variants v  -- the mission_variants_servable index
            WHERE v.mission_id = (SELECT id FROM chosen) AND v.retired_at IS NULL
              AND v.serve_count < v.rendered_serves
            ORDER BY v.serve_count, v.id
            LIMIT 1
        ),
        rendering AS (
            SELECT r.id FROM mission_renderings r  -- the mission_renderings_servable index
            WHERE r.variant_id = (SELECT id FROM variant)
              AND r.status = 'ready' AND r.serve_count < r.max_serves
            ORDER BY r.serve_count, r.id
            LIMIT 1
        ),
        served_rendering AS (
            UPDATE mission_renderings r
            SET serve_count = r.serve_count + 1
            -- By primary key, each update below too: a join could scan the table to find one row.
            WHERE r.id = (SELECT id FROM rendering)
            RETURNING r.id, r.variant_id, r.files
        ),
        served_variant AS (
            UPDATE mission_variants v
            SET serve_count = v.serve_count + 1,
                retired_at = CASE WHEN v.serve_count + 1 >= v.max_serves
                                  THEN coalesce($4::timestamptz, now()) END,
                retire_reason = CASE WHEN v.serve_count + 1 >= v.max_serves
                                     THEN 'served ' || v.max_serves || ' times' END
            WHERE v.id = (SELECT variant_id FROM served_rendering)
            RETURNING v.id, v.mission_id
        ),
        served AS (
            UPDATE missions m
            SET serve_count = m.serve_count + 1, ready_serves = m.ready_serves - 1,
                retired_at = CASE WHEN m.serve_count + 1 >= m.max_serves
                                  THEN coalesce($4::timestamptz, now()) END,
                retire_reason = CASE WHEN m.serve_count + 1 >= m.max_serves
                                     THEN 'served ' || m.max_serves || ' times' END
            WHERE m.id = (SELECT mission_id FROM served_variant)
              AND m.qa_status = 'approved' AND m.retired_at IS NULL
            RETURNING m.id, m.domain, m.language, m.title, m.brief, m.serve_count
        )
        INSERT INTO mission_instances
            (mission_id, variant_id, rendering_id, user_id, cohort, track, domain, language, title,
             brief, files, serve_number, created_at, created_by)
        SELECT served.id, served_variant.id, served_rendering.id, $2::text, $7::text, $3::text,
               served.domain, served.language, served.title, served.brief, served_rendering.files,
               served.serve_count, coalesce($4::timestamptz, now()), $6::bigint
        FROM served, served_variant, served_rendering
        RETURNING *
        INTO made;
        IF made.id IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'no_data_found';
        END IF;
    EXCEPTION
        WHEN no_data_found OR unique_violation THEN
            RETURN;
    END;
    RETURN NEXT made;
END
$$;

-- A serve always takes exactly one of its variant's ready serves (the serve that retires the
-- variant at its limit takes the last), which the function above counts itself.
CREATE OR REPLACE TRIGGER mission_variants_counted_on_update AFTER UPDATE ON mission_variants
    FOR EACH ROW
    WHEN (NEW.serve_count = OLD.serve_count
          OR current_setting('warmpool.serve_counts_ready_serves', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION mission_variants_count_ready();
