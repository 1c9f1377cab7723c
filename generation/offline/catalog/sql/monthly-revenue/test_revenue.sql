CREATE FUNCTION test_revenue_for_the_first_quarter() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO orders (placed_on, total_cents, status) VALUES
        ('2024-01-01', 1000, 'paid'),       -- the first day of January
        ('2024-01-31', 2500, 'paid'),       -- the last day of January
        ('2024-01-15', 9999, 'refunded'),
        ('2024-03-01', 4000, 'paid'),       -- February had no sales
        ('2024-03-31', 500, 'cancelled'),
        ('2024-04-01', 7000, 'paid');       -- after the report
    RETURN NEXT results_eq(
        $$SELECT * FROM monthly_revenue('2024-01-01', '2024-03-01')$$,
        $$VALUES ('2024-01-01'::date, 2::bigint, 3500::bigint),
                 ('2024-02-01', 0, 0),
                 ('2024-03-01', 1, 4000)$$,
        'January to March'
    );
END
$test$;

CREATE FUNCTION test_revenue_from_mid_month_dates() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO orders (placed_on, total_cents, status) VALUES
        ('2023-11-30', 1200, 'paid'),
        ('2023-12-01', 3000, 'paid'),       -- the first day of December
        ('2023-12-24', 4500, 'paid'),
        ('2023-12-26', 4500, 'refunded'),
        ('2024-02-01', 800, 'paid');        -- January had no sales
    RETURN NEXT results_eq(
        $$SELECT * FROM monthly_revenue('2023-11-15', '2024-02-10')$$,
        $$VALUES ('2023-11-01'::date, 1::bigint, 1200::bigint),
                 ('2023-12-01', 2, 7500),
                 ('2024-01-01', 0, 0),
                 ('2024-02-01', 1, 800)$$,
        'November to February, asked for with mid-month dates'
    );
END
$test$;

CREATE FUNCTION test_revenue_around_a_quiet_summer() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO orders (placed_on, total_cents, status) VALUES
        ('2024-06-30', 2000, 'paid'),       -- the last day of June
        ('2024-07-01', 100, 'cancelled'),
        ('2024-08-01', 6000, 'paid'),       -- the first day of August
        ('2024-08-01', 50, 'paid'),
        ('2024-09-01', 999, 'paid');        -- after the report
    RETURN NEXT results_eq(
        $$SELECT * FROM monthly_revenue('2024-06-01', '2024-08-31')$$,
        $$VALUES ('2024-06-01'::date, 1::bigint, 2000::bigint),
                 ('2024-07-01', 0, 0),
                 ('2024-08-01', 2, 6050)$$,
        'June to August'
    );
END
$test$;
