CREATE FUNCTION test_hidden_revenue_across_a_year_end() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO orders (placed_on, total_cents, status) VALUES
        ('2024-12-31', 2000, 'paid'),      -- the last day of December
        ('2025-01-01', 3000, 'paid'),      -- the first day of January
        ('2025-01-20', 1500, 'paid'),
        ('2025-01-21', 1500, 'cancelled'),
        ('2025-02-28', 900, 'refunded');   -- February had no paid sale
    RETURN NEXT results_eq(
        $$SELECT * FROM monthly_revenue('2024-12-10', '2025-02-28')$$,
        $$VALUES ('2024-12-01'::date, 1::bigint, 2000::bigint),
                 ('2025-01-01', 2, 4500),
                 ('2025-02-01', 0, 0)$$,
        'December to February'
    );
END
$test$;

CREATE FUNCTION test_hidden_revenue_of_one_month() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO orders (placed_on, total_cents, status) VALUES
        ('2025-07-04', 1234, 'paid'), ('2025-07-05', 66, 'paid'), ('2025-08-01', 50, 'paid');
    RETURN NEXT results_eq(
        $$SELECT * FROM monthly_revenue('2025-07-31', '2025-07-01')$$,
        $$VALUES ('2025-07-01'::date, 2::bigint, 1300::bigint)$$,
        'July alone'
    );
END
$test$;
