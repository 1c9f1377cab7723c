"""Missions as the pool stores them and reviewers read them, and `store`, which the generation
pipeline calls once a mission has its proof."""

from __future__ import annotations

import difflib
import hashlib
from datetime import datetime
from typing import Any, Literal, get_args

import asyncpg
import msgspec

from core.domains import Domain, Kind, Language
from core.sql import Executor, Queries
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


class MissionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A line of the review queue."""

    id: str
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


class Mission(MissionSummary, frozen=True, kw_only=True):
    """Everything about a mission, for reviewers; candidates never see gold, bug or hint."""

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
    job_id: str | None
    review_note: str | None
    retire_reason: str | None
    retired_by: str | None


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
    """Insert a mission; its id, or None when the same mission is already stored.

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
    return mission_id


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
    return msgspec.convert(_with_string_ids(row), MissionSummary)


def mission_from_row(row: asyncpg.Record) -> Mission:
    fields = _with_string_ids(row)
    fields["verdict"] = row["proof"]["verdict"]
    fields["diff"] = unified_diff(row["gold_files"], row["sabotaged_files"])
    return msgspec.convert(fields, Mission)


def _with_string_ids(row: asyncpg.Record) -> dict[str, Any]:
    fields = dict(row)
    fields["id"] = str(row["id"])
    if "job_id" in fields:
        fields["job_id"] = None if row["job_id"] is None else str(row["job_id"])
    return fields
