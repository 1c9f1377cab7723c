-- The invoices to chase on a given day: past their due date with a balance left.
CREATE FUNCTION overdue_invoices(as_of date)
RETURNS TABLE (invoice_id integer, customer text, due_on date, balance_cents integer)
LANGUAGE sql STABLE AS $$
    SELECT id, name, due, balance
    FROM (
        SELECT i.id, c.name, i.due_on AS due,
               (i.amount_cents - coalesce(sum(p.amount_cents), 0))::integer AS balance
        FROM invoices i
        JOIN customers c ON c.id = i.customer_id
        -- Payments made after the report's day do not count yet.
        LEFT JOIN payments p ON p.invoice_id = i.id AND p.paid_on <= as_of
        WHERE i.due_on < as_of
        GROUP BY i.id, c.name
    ) AS balances
    WHERE balance > 0
    ORDER BY due ASC, id ASC
$$;
