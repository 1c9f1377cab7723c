-- What the watchdog of SQL proofs asks through the admin connection, on the proof server,
-- about one run: its database's name and its backend's pid come in as parameters.

-- name: proof_run_usage
-- The run database's size, which counts its unlogged and temporary tables (they live in its
-- folder like the rest), the parallel workers the run's backend leads, and the locks it holds
-- in the server's shared lock table.
SELECT pg_database_size($1::text) AS database_bytes,
       (SELECT count(*) FROM pg_stat_activity WHERE leader_pid = $2::int) AS parallel_workers,
       (SELECT count(*) FROM pg_locks WHERE pid = $2::int) AS locks

-- name: proof_backend_memory
-- A backend's private memory in kB (RssAnon: work_mem, temp_buffers, hash tables and the
-- rest, without the shared buffers every backend maps), read from the server's /proc, so it
-- works whichever machine the server runs on; NULL where the server has no /proc.
SELECT substring(pg_read_file('/proc/' || $1::int || '/status', 0, 8192, true)
                 FROM 'RssAnon:\s+([0-9]+)')::bigint AS kilobytes

-- name: proof_backend_terminate
-- Ends the backend and waits up to $2 ms for it to be gone, its memory with it.
SELECT pg_terminate_backend($1::int, $2::bigint)
