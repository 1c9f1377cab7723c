-- How many subscriptions each plan has active on a given day.
CREATE FUNCTION active_subscribers(on_day date)
RETURNS TABLE (plan text, subscribers bigint)
LANGUAGE sql STABLE AS $$
    SELECT s.plan, count(*)
    FROM subscriptions s
    WHERE s.started_on <= on_day AND (s.ended_on IS NULL OR s.ended_on >= on_day)
    GROUP BY s.plan
    ORDER BY count(*) DESC, s.plan ASC
$$;
