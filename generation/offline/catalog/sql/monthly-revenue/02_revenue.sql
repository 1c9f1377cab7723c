-- Paid orders and revenue per calendar month, including months without a sale.
CREATE FUNCTION monthly_revenue(first_month date, last_month date)
RETURNS TABLE (month date, paid_orders bigint, revenue_cents bigint)
LANGUAGE sql STABLE AS $$
    SELECT m.start::date, count(o.id), coalesce(sum(o.total_cents), 0)
    FROM generate_series(
        date_trunc('month', first_month), date_trunc('month', last_month), interval '1 month'
    ) AS m(start)
    LEFT JOIN orders o
        ON o.status = 'paid' AND o.placed_on >= m.start AND o.placed_on < m.start + interval '1 month'
    GROUP BY m.start
    ORDER BY m.start ASC
$$;
