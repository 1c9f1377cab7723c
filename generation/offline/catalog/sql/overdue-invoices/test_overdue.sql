CREATE FUNCTION test_overdue_at_the_end_of_march() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO customers VALUES (1, 'Acme Ltd'), (2, 'Birch & Co');
    INSERT INTO invoices VALUES
        (101, 1, '2024-03-01', 50000),  -- paid in part on the report's day
        (102, 2, '2024-03-01', 12000),  -- never paid
        (103, 1, '2024-03-31', 9900),   -- due on the report's day: not overdue yet
        (104, 2, '2024-02-15', 20000),  -- paid in full
        (105, 1, '2024-03-20', 7500),   -- paid after the report's day
        (106, 2, '2024-03-10', 3001);   -- one cent short
    INSERT INTO payments (invoice_id, paid_on, amount_cents) VALUES
        (101, '2024-03-31', 20000),
        (104, '2024-02-10', 15000),
        (104, '2024-03-05', 5000),
        (105, '2024-04-02', 7500),
        (106, '2024-03-11', 3000);
    RETURN NEXT results_eq(
        $$SELECT * FROM overdue_invoices('2024-03-31')$$,
        $$VALUES (101, 'Acme Ltd'::text, '2024-03-01'::date, 30000),
                 (102, 'Birch & Co', '2024-03-01', 12000),
                 (106, 'Birch & Co', '2024-03-10', 1),
                 (105, 'Acme Ltd', '2024-03-20', 7500)$$,
        'overdue invoices on 31 March'
    );
END
$test$;

CREATE FUNCTION test_overdue_for_a_single_customer() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO customers VALUES (7, 'Cedar Cafe');
    INSERT INTO invoices VALUES
        (201, 7, '2024-06-30', 4500),  -- due the day before the report
        (202, 7, '2024-06-30', 8000),  -- same due date, paid in two parts
        (203, 7, '2024-07-01', 1500),  -- due on the report's day
        (204, 7, '2024-05-31', 2500),  -- paid the day after the report
        (205, 7, '2024-05-15', 1000),  -- a cent short
        (206, 7, '2024-06-30', 600);
    INSERT INTO payments (invoice_id, paid_on, amount_cents) VALUES
        (202, '2024-06-01', 4000),
        (202, '2024-07-01', 4000),
        (204, '2024-07-02', 2500),
        (205, '2024-05-15', 999);
    RETURN NEXT results_eq(
        $$SELECT * FROM overdue_invoices('2024-07-01')$$,
        $$VALUES (205, 'Cedar Cafe'::text, '2024-05-15'::date, 1),
                 (204, 'Cedar Cafe', '2024-05-31', 2500),
                 (201, 'Cedar Cafe', '2024-06-30', 4500),
                 (206, 'Cedar Cafe', '2024-06-30', 600)$$,
        'invoice 202 was paid in full on the report''s day'
    );
END
$test$;

CREATE FUNCTION test_overdue_across_the_year_end() RETURNS SETOF text LANGUAGE plpgsql AS $test$
BEGIN
    INSERT INTO customers VALUES (3, 'Dune Surf'), (4, 'Elm Street Dental');
    INSERT INTO invoices VALUES
        (301, 4, '2023-12-31', 60000),
        (302, 3, '2023-12-31', 25000),
        (303, 3, '2024-01-02', 10000),  -- due on the report's day
        (304, 4, '2023-11-30', 5000),   -- paid in full
        (305, 3, '2023-12-01', 700);
    INSERT INTO payments (invoice_id, paid_on, amount_cents) VALUES
        (301, '2024-01-02', 59999),
        (302, '2024-01-03', 25000),
        (304, '2023-11-29', 5000);
    RETURN NEXT results_eq(
        $$SELECT * FROM overdue_invoices('2024-01-02')$$,
        $$VALUES (305, 'Dune Surf'::text, '2023-12-01'::date, 700),
                 (301, 'Elm Street Dental', '2023-12-31', 1),
                 (302, 'Dune Surf', '2023-12-31', 25000)$$,
        'overdue invoices on 2 January'
    );
END
$test$;
