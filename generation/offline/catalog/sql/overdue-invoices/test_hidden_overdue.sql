CREATE FUNCTION test_hidden_overdue_with_partial_payments() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO customers VALUES (3, 'Delta Farms'), (4, 'Elm Studio');
    INSERT INTO invoices VALUES
        (201, 3, '2025-01-10', 10000),  -- paid in two parts, one cent short
        (202, 4, '2025-01-05', 4000),   -- due first
        (203, 4, '2025-01-20', 2500),   -- due on the report's day: not overdue
        (204, 3, '2025-01-05', 800);    -- the same due date as 202, a higher id
    INSERT INTO payments (invoice_id, paid_on, amount_cents) VALUES
        (201, '2025-01-11', 6000),
        (201, '2025-01-19', 3999),
        (202, '2025-01-21', 4000);      -- paid the day after the report
    RETURN NEXT results_eq(
        $$SELECT * FROM overdue_invoices('2025-01-20')$$,
        $$VALUES (202, 'Elm Studio'::text, '2025-01-05'::date, 4000),
                 (204, 'Delta Farms', '2025-01-05', 800),
                 (201, 'Delta Farms', '2025-01-10', 1)$$,
        'overdue invoices on 20 January'
    );
END
$test$;

CREATE FUNCTION test_hidden_overdue_when_all_is_paid() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO customers VALUES (5, 'Fig Bakery');
    INSERT INTO invoices VALUES (301, 5, '2025-03-01', 5000);
    INSERT INTO payments (invoice_id, paid_on, amount_cents) VALUES (301, '2025-02-27', 5000);
    RETURN NEXT is_empty(
        $$SELECT * FROM overdue_invoices('2025-03-15')$$,
        'nothing to chase once every invoice is paid'
    );
END
$test$;
