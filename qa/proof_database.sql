-- What runs inside the proof databases, where pgTAP lives in schema `tap`: installing it in
-- the template, and each run's pgTAP tests, as the run's own role.
-- (Not a *queries.sql file: these statements need pgTAP, which warmpool's database lacks;
-- tests/integration/proof/test_sql_proof.py prepares them in a run database.)

-- name: proof_template_install_pgtap
-- pgTAP in its own schema: a mission's public schema holds only what the mission creates.
-- Then a guard on every DDL statement of a run (the solution's, or one its code runs during a
-- test), since code in the tests' session could otherwise change what they report: a function
-- named like one of pgTAP's, of other argument types, is chosen over pgTAP's wherever it is on
-- the search path (is(bigint, bigint, text) beats is(anyelement, anyelement, text)); pgTAP's
-- runner runs public.startup*, setup*, teardown* and shutdown* around the tests; an operator
-- changes what a comparison means. Event triggers are a superuser's, as is this template.
CREATE SCHEMA tap;
CREATE EXTENSION pgtap SCHEMA tap;
GRANT USAGE ON SCHEMA tap TO PUBLIC;
CREATE FUNCTION tap.warmpool_refuse_shadows() RETURNS event_trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $guard$
DECLARE
    command record;
BEGIN
    FOR command IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF command.object_type = 'operator' THEN
            RAISE EXCEPTION 'operator % is refused: an operator could change what the tests compare',
                command.object_identity;
        END IF;
        IF command.classid = 'pg_proc'::regclass AND EXISTS (
            SELECT 1 FROM pg_proc p
            WHERE p.oid = command.objid
              AND (p.proname ~ '^(startup|setup|teardown|shutdown)'
                   OR EXISTS (SELECT 1 FROM pg_proc t
                              WHERE t.pronamespace = 'tap'::regnamespace
                                AND t.proname = p.proname AND t.oid <> p.oid))
        ) THEN
            RAISE EXCEPTION '% is refused: its name is one that pgTAP or its test runner calls',
                command.object_identity;
        END IF;
    END LOOP;
END
$guard$;
CREATE EVENT TRIGGER warmpool_refuse_shadows ON ddl_command_end
EXECUTE FUNCTION tap.warmpool_refuse_shadows()

-- name: proof_test_functions
-- The mission's pgTAP xUnit tests: functions named test_* in schema public.
SELECT DISTINCT p.proname AS name
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'public'
   AND p.proname LIKE 'test\_%'
 ORDER BY 1

-- name: proof_test_prepare
-- Inside the test's own transaction: pgTAP's functions before any the mission defines (a
-- mission cannot shadow ok() or is()), and the timeout back in force.
SELECT set_config('search_path', 'tap, public', true),
       set_config('statement_timeout', $1::text, true)

-- name: proof_test_run
-- One test function through pgTAP's runner, which runs it in a subtransaction it rolls back.
-- Each line is cut to $2 characters and at most $3 lines come back.
SELECT left(line, $2::int) AS line
  FROM tap.runtests('public'::name, $1::text) AS output(line)
 LIMIT $3::int

-- name: proof_session_limits_raised
-- The limits of $1 that the session has raised above what the run's role sets: reset_val is
-- the role's value, fixed when the session began, and a statement_timeout of 0 is none at all.
SELECT name, current_setting(name) AS raised_to
  FROM pg_settings
 WHERE name = ANY($1::text[])
   AND (CASE WHEN name = 'statement_timeout' AND setting = '0' THEN 'Infinity' ELSE setting END)::float8
     > (CASE WHEN name = 'statement_timeout' AND reset_val = '0' THEN 'Infinity' ELSE reset_val END)::float8
 ORDER BY name
