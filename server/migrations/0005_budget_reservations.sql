-- The spend budget: each claim reserves its job's worst-case cost until the job ends.
ALTER TABLE generation_jobs ADD COLUMN reserved_usd numeric(14, 6) NOT NULL DEFAULT 0;

-- What today's budget has committed at a moment: the spend of the UTC day so far, and what
-- jobs in flight may still spend of their reservations (reservation minus their attempt's
-- spend). One definition for the claim, which checks it, and for the reports.
CREATE FUNCTION generation_budget_committed(moment timestamptz)
RETURNS TABLE (spent_usd numeric, reserved_usd numeric)
LANGUAGE sql STABLE AS $$
    SELECT
        (SELECT coalesce(sum(cost_usd), 0) FROM llm_calls
         WHERE started_at >= date_trunc('day', moment, 'UTC')),
        (SELECT coalesce(sum(greatest(g.reserved_usd - coalesce(s.spent, 0), 0)), 0)
         FROM generation_jobs g
         LEFT JOIN LATERAL (
             SELECT sum(c.cost_usd) AS spent FROM llm_calls c
             WHERE c.job_id = g.id AND c.attempt = g.attempt
         ) s ON true
         WHERE g.status = 'generating')
$$;
