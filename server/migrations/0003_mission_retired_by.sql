-- Who retired a mission: a reviewer's key name, like reviewed_by. Null when the pool retired
-- it on reaching its serve limit (retire_reason says so).
ALTER TABLE missions ADD COLUMN retired_by text;
