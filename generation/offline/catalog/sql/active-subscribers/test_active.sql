CREATE FUNCTION test_active_on_the_first_of_march() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO subscriptions (customer, plan, started_on, ended_on) VALUES
        ('ana', 'premium', '2024-01-10', NULL),
        ('ben', 'premium', '2024-03-01', NULL),        -- starts that day
        ('cai', 'basic', '2024-02-01', '2024-03-01'),  -- last day of access that day
        ('dee', 'basic', '2024-02-01', '2024-02-29'),  -- ended the day before
        ('eli', 'family', '2024-03-02', NULL),         -- starts the day after
        ('fay', 'family', '2023-12-01', '2024-06-30'),
        ('gus', 'student', '2024-01-01', '2024-01-31');
    RETURN NEXT results_eq(
        $$SELECT * FROM active_subscribers('2024-03-01')$$,
        $$VALUES ('premium'::text, 2::bigint), ('basic', 1), ('family', 1)$$,
        'subscribers on 1 March'
    );
END
$test$;

CREATE FUNCTION test_active_at_the_end_of_a_promotion() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO subscriptions (customer, plan, started_on, ended_on) VALUES
        ('hal', 'trial', '2024-08-01', '2024-08-31'),  -- last day of the trial
        ('ivy', 'trial', '2024-08-15', '2024-08-31'),
        ('jon', 'trial', '2024-08-20', '2024-08-30'),  -- ended the day before
        ('kim', 'annual', '2024-08-31', NULL),         -- converted that day
        ('lea', 'annual', '2023-09-01', '2024-08-31'),
        ('nat', 'annual', '2024-01-01', NULL),
        ('uma', 'monthly', '2024-07-01', NULL),
        ('val', 'monthly', '2024-08-10', NULL),
        ('max', 'monthly', '2024-09-01', NULL);        -- starts the day after
    RETURN NEXT results_eq(
        $$SELECT * FROM active_subscribers('2024-08-31')$$,
        $$VALUES ('annual'::text, 3::bigint), ('monthly', 2), ('trial', 2)$$,
        'subscribers on the last day of the summer trial'
    );
END
$test$;

CREATE FUNCTION test_active_on_launch_day() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO subscriptions (customer, plan, started_on, ended_on) VALUES
        ('nia', 'family', '2024-05-01', NULL),         -- starts on launch day
        ('oz', 'family', '2024-05-01', '2024-05-01'),  -- one day only
        ('pam', 'family', '2024-04-20', NULL),
        ('quy', 'basic', '2024-04-01', NULL),
        ('ray', 'basic', '2024-04-01', '2024-04-30'),  -- ended the day before
        ('sol', 'student', '2024-05-02', NULL),        -- starts the day after
        ('tom', 'student', '2024-04-15', NULL);
    RETURN NEXT results_eq(
        $$SELECT * FROM active_subscribers('2024-05-01')$$,
        $$VALUES ('family'::text, 3::bigint), ('basic', 1), ('student', 1)$$,
        'subscribers on launch day'
    );
END
$test$;
