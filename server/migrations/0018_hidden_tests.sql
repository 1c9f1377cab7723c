-- Hidden tests: the tests of a mission that no instance contains, run only when a candidate's
-- fix is graded, so that a fix which special-cases the visible tests fails. Proven with the
-- mission (the gold passes them). Missions stored before have none.
ALTER TABLE missions ADD COLUMN hidden_test_files jsonb NOT NULL DEFAULT '{}';
