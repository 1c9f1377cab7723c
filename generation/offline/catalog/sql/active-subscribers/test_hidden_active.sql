CREATE FUNCTION test_hidden_active_on_a_quiet_day() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO subscriptions (customer, plan, started_on, ended_on) VALUES
        ('oli', 'basic', '2025-05-01', NULL),
        ('pia', 'basic', '2025-04-01', '2025-05-10'),  -- last day of access that day
        ('quin', 'pro', '2025-05-10', NULL),           -- starts that day
        ('rae', 'pro', '2025-05-11', NULL),            -- the day after
        ('sol', 'pro', '2025-01-01', '2025-05-09'),    -- ended the day before
        ('tam', 'team', '2025-02-01', NULL);
    RETURN NEXT results_eq(
        $$SELECT * FROM active_subscribers('2025-05-10')$$,
        $$VALUES ('basic'::text, 2::bigint), ('pro', 1), ('team', 1)$$,
        'subscribers on 10 May'
    );
END
$test$;

CREATE FUNCTION test_hidden_active_before_anyone_started() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO subscriptions (customer, plan, started_on, ended_on) VALUES
        ('una', 'basic', '2025-06-01', NULL);
    RETURN NEXT is_empty(
        $$SELECT * FROM active_subscribers('2025-05-31')$$,
        'nobody is active the day before the first start'
    );
END
$test$;
