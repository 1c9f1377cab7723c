-- What runs inside the proof databases, where pgTAP lives in schema `tap`: installing it in
-- the template, and each run's pgTAP tests, as the run's own role.
-- (Not a *queries.sql file: these statements need pgTAP, which warmpool's database lacks;
-- tests/integration/proof/test_sql_proof.py prepares them in a run database.)

-- name: proof_template_install_pgtap
-- pgTAP in its own schema: a mission's public schema holds only what the mission creates.
CREATE SCHEMA tap;
CREATE EXTENSION pgtap SCHEMA tap;
GRANT USAGE ON SCHEMA tap TO PUBLIC

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
