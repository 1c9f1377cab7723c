"""Missions and their variants as the pool stores them and reviewers read them: `store`, which
the generation pipeline calls once a mission has its proof, stores the mission with its first
variant; `store_variant` adds another planted bug, proven, to a stored mission.

Each variant gets its identity rendering (its own files, proven by its own proof), ready to
serve at once: once in a domain with code, where every instance is a rendering of its own (the
others come from rendering jobs, `qa.rendered`), as often as the variant in a domain without."""

from __future__ import annotations

import difflib
import hashlib
from datetime import datetime
from typing import Any, Literal, get_args

import asyncpg
import msgspec

from core.domains import Domain, Kind, Language
from core.ids import Id
from core.sql import Executor, Queries
from qa import trace
from qa.results import ProofRun

queries = Queries("qa")

QaStatus = Literal["awaiting_review", "approved", "rejected"]
QA_STATUSES: tuple[QaStatus, ...] = get_args(QaStatus)

Files = dict[str, str]

NO_CODE_VERDICT = "no code: human review only"
# reviewed_by of a mission that a passed proof approved (a domain with `review: proof`).
PROOF_REVIEWER = "proof"


class MissionProof(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The `proof` column: the gold run, every sabotage try's run, and the verdict; with
    hidden tests, the gold's run of them (it must pass) and the accepted sabotage's (whether
    it fails any is recorded, not required). Missions proven before hidden tests have none."""

    gold: ProofRun | None
    sabotage_tries: list[ProofRun]
    verdict: str
    hidden_gold: ProofRun | None = None
    hidden_sabotage: ProofRun | None = None


def no_code_proof() -> MissionProof:
    """The proof of a mission of language `none`: nothing runs, a person reviews it."""
    return MissionProof(gold=None, sabotage_tries=[], verdict=NO_CODE_VERDICT)


# A mission whose pass rate over at least this many graded submissions is 0 % or 100 % is
# flagged in the review queue: nobody solves it, or everybody does.
FLAG_AFTER_SUBMISSIONS = 20


class SubmissionStats(msgspec.Struct, frozen=True, kw_only=True):
    """How candidates fare: graded submissions, those that passed, and the median time from an
    instance's serve to a passing submission."""

    count: int
    passed: int
    pass_rate: float | None
    median_duration_s: float | None


NO_SUBMISSIONS = SubmissionStats(count=0, passed=0, pass_rate=None, median_duration_s=None)


def grading_flag(submissions: SubmissionStats) -> str | None:
    """Why the mission's pass rate is worth a reviewer's look, if it is."""
    if submissions.count < FLAG_AFTER_SUBMISSIONS:
        return None
    if submissions.passed == 0:
        return f"nobody solves it: 0 of {submissions.count} submissions passed"
    if submissions.passed == submissions.count:
        return f"everybody solves it: all {submissions.count} submissions passed"
    return None


class MissionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A line of the review queue."""

    id: Id
    domain: str
    kind: Kind
    language: Language
    title: str
    qa_status: QaStatus
    verdict: str
    requested_by: str | None
    serve_count: int
    max_serves: int
    retired_at: datetime | None
    reviewed_by: str | None
    reviewed_at: datetime | None
    created_at: datetime
    submissions: SubmissionStats = NO_SUBMISSIONS
    # Set when the pass rate says the mission is worth a look (grading_flag).
    flag: str | None = None


class Variant(msgspec.Struct, frozen=True, kw_only=True):
    """One planted bug of a mission, for reviewers and graders."""

    id: Id
    bug_summary: str
    grader_hint: str
    sabotaged_files: Files
    diff: dict[str, str]
    proof: MissionProof
    provider: str
    serve_count: int
    max_serves: int
    retired_at: datetime | None
    retire_reason: str | None
    retired_by: str | None
    created_at: datetime
    submissions: SubmissionStats = NO_SUBMISSIONS


class Mission(MissionSummary, frozen=True, kw_only=True):
    """Everything about a mission, for reviewers; candidates never see gold, bug or hint. Its
    own sabotaged files, bug summary and hint are its first variant's."""

    brief: str
    gold_files: Files
    test_files: Files
    # Never in an instance: only grading runs them.
    hidden_test_files: Files
    sabotaged_files: Files
    # path -> unified diff from the gold file to the sabotaged one, for changed files only.
    diff: dict[str, str]
    bug_summary: str
    grader_hint: str
    proof: MissionProof
    provider: str
    prompt_version: str | None
    job_id: Id | None
    review_note: str | None
    retire_reason: str | None
    retired_by: str | None
    variants: list[Variant]


class MissionToVary(msgspec.Struct, frozen=True, kw_only=True):
    """What planting another bug in a stored mission needs: the mission as its draft was, the
    gold's proof runs (of the tests and of the hidden tests), and the bugs it holds already."""

    id: int
    title: str
    brief: str
    gold_files: Files
    test_files: Files
    hidden_test_files: Files
    gold: ProofRun | None
    hidden_gold: ProofRun | None
    max_serves: int
    known_bugs: list[Files]


async def store(
    connection: Executor,
    *,
    domain: Domain,
    title: str,
    brief: str,
    gold_files: Files,
    test_files: Files,
    hidden_test_files: Files,
    sabotaged_files: Files,
    bug_summary: str,
    grader_hint: str,
    proof: MissionProof,
    provider: str,
    prompt_version: str | None,
    job_id: int | None,
    requested_by: str | None,
    max_serves: int,
    proven: bool,
) -> int | None:
    """Insert a mission with its first variant; its id, or None when the same mission is
    already stored.

    A proven mission of a domain with `review: proof` is approved at once; any other waits
    for a reviewer.
    """
    approved_by_proof = domain.review == "proof" and proven
    mission_id: int | None = await connection.fetchval(
        queries["mission_insert_unless_duplicate"],
        domain.name,
        domain.kind,
        domain.language,
        title,
        brief,
        gold_files,
        test_files,
        sabotaged_files,
        bug_summary,
        grader_hint,
        proof,
        provider,
        prompt_version,
        job_id,
        requested_by,
        max_serves,
        content_hash(domain.name, gold_files, test_files, sabotaged_files, hidden_test_files),
        "approved" if approved_by_proof else "awaiting_review",
        PROOF_REVIEWER if approved_by_proof else None,
        proof.verdict if approved_by_proof else None,
        hidden_test_files,
    )
    if mission_id is not None:
        await store_variant(
            connection,
            domain=domain,
            mission_id=mission_id,
            sabotaged_files=sabotaged_files,
            bug_summary=bug_summary,
            grader_hint=grader_hint,
            proof=proof,
            provider=provider,
            job_id=job_id,
            max_serves=domain.variant_serves(max_serves),
        )
    return mission_id


async def store_variant(
    connection: Executor,
    *,
    domain: Domain,
    mission_id: int,
    sabotaged_files: Files,
    bug_summary: str,
    grader_hint: str,
    proof: MissionProof,
    provider: str,
    job_id: int | None,
    max_serves: int,
) -> int | None:
    """Add a proven bug to a stored mission, with its identity rendering ready to serve; its
    id, or None when the mission holds the same bug already."""
    identity_serves = max_serves if domain.language == "none" else 1
    variant_id: int | None = await connection.fetchval(
        queries["variant_insert_unless_duplicate"],
        mission_id,
        sabotaged_files,
        bug_summary,
        grader_hint,
        proof,
        provider,
        job_id,
        max_serves,
        identity_serves,
    )
    if variant_id is not None:
        await trace.fingerprint_renderings_of(connection, variant_id)
    return variant_id


async def to_vary(connection: Executor, mission_id: int) -> MissionToVary | None:
    """The mission, if it is still served (approved and not retired)."""
    row = await connection.fetchrow(queries["mission_to_vary"], mission_id)
    if row is None:
        return None
    proof = msgspec.convert(row["proof"], MissionProof)
    return MissionToVary(
        id=row["id"],
        title=row["title"],
        brief=row["brief"],
        gold_files=row["gold_files"],
        test_files=row["test_files"],
        hidden_test_files=row["hidden_test_files"],
        gold=proof.gold,
        hidden_gold=proof.hidden_gold,
        max_serves=row["max_serves"],
        known_bugs=row["known_bugs"],
    )


async def variants_of(connection: Executor, mission_id: int) -> list[Variant]:
    """The mission's variants, the first first."""
    rows = await connection.fetch(queries["variants_of_mission"], mission_id)
    return [variant_from_row(row) for row in rows]


def content_hash(
    domain: str,
    gold_files: Files,
    test_files: Files,
    sabotaged_files: Files,
    hidden_test_files: Files | None = None,
) -> bytes:
    """sha256 of the domain and the file sets in canonical JSON (sorted keys). Hidden tests
    count only when there are some, so the hashes of missions stored before them hold."""
    fields = {
        "domain": domain,
        "gold_files": gold_files,
        "test_files": test_files,
        "sabotaged_files": sabotaged_files,
    }
    if hidden_test_files:
        fields["hidden_test_files"] = hidden_test_files
    canonical = msgspec.json.encode(fields, order="sorted")
    return hashlib.sha256(canonical).digest()


def unified_diff(gold_files: Files, sabotaged_files: Files) -> dict[str, str]:
    """path -> the unified diff from gold to sabotaged, for each file that differs."""
    diffs: dict[str, str] = {}
    for path in sorted(gold_files.keys() | sabotaged_files.keys()):
        gold, sabotaged = gold_files.get(path), sabotaged_files.get(path)
        if gold == sabotaged:
            continue
        lines = difflib.unified_diff(
            (gold or "").splitlines(),
            (sabotaged or "").splitlines(),
            fromfile=f"a/{path}" if gold is not None else "/dev/null",
            tofile=f"b/{path}" if sabotaged is not None else "/dev/null",
            lineterm="",
        )
        diffs[path] = "\n".join(lines) + "\n"
    return diffs


def summary_from_row(row: asyncpg.Record) -> MissionSummary:
    return msgspec.convert(_with_ids(row), MissionSummary)


def mission_from_row(row: asyncpg.Record, variants: list[Variant]) -> Mission:
    fields = _with_ids(row)
    fields["verdict"] = row["proof"]["verdict"]
    fields["diff"] = unified_diff(row["gold_files"], row["sabotaged_files"])
    fields["variants"] = variants
    return msgspec.convert(fields, Mission)


def variant_from_row(row: asyncpg.Record) -> Variant:
    """A row of variants_of_mission, which carries the mission's gold to diff against."""
    fields = dict(row)
    fields["id"] = Id(row["id"])
    fields["diff"] = unified_diff(fields.pop("gold_files"), row["sabotaged_files"])
    return msgspec.convert(fields, Variant)


def _with_ids(row: asyncpg.Record) -> dict[str, Any]:
    fields = dict(row)
    fields["id"] = Id(row["id"])
    if "job_id" in fields:
        fields["job_id"] = Id.of(row["job_id"])
    return fields
