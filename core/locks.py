"""Every advisory lock warmpool takes, each under a key of its own.

Postgres keeps advisory locks per database, in two key spaces: single bigint keys, and pairs
of ints. warmpool's pairs are (class, detail): the class names the use, the detail (0, or a
hash such as the user's) tells its locks apart. Each query that takes a lock names its entry
here in a comment (`advisory lock: <name>`); a test checks that every lock taken in the code
is one of these, under its key, and that no two entries share a key.
"""

from __future__ import annotations

from typing import NamedTuple


class AdvisoryLock(NamedTuple):
    # (class,) for a pair whose detail varies, (class, detail) for one pair, or a bigint key.
    key: tuple[int, ...] | int
    why: str


LOCKS: dict[str, AdvisoryLock] = {
    "dispatch": AdvisoryLock(
        (1, 0), "the claim counts what is in flight and claims, one dispatcher at a time"
    ),
    "user": AdvisoryLock(
        (2,), "one user's enqueues, so counting their active jobs and inserting one is atomic"
    ),
    "api_keys_bootstrap": AdvisoryLock(
        (3, 0), "processes starting on an empty database create one set of keys"
    ),
    "replenish_leader": AdvisoryLock((4, 0), "one replenishment pass at a time"),
    "proof_setup": AdvisoryLock(
        (5, 0), "one prover at a time closes the proof server's database and builds its template"
    ),
    "grading_user": AdvisoryLock(
        (6,), "one user's submissions, so counting their pending ones and inserting one is atomic"
    ),
    "grading_dispatch": AdvisoryLock(
        (7, 0), "the grading claim counts what is running and claims, one dispatcher at a time"
    ),
    "batch_leader": AdvisoryLock(
        (8, 0), "one batch pass at a time submits the queued lines and polls the open batches"
    ),
    "migrations": AdvisoryLock(
        0x77_61_72_6D,
        "processes starting together apply each migration once",  # "warm"
    ),
}
