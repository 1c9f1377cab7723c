"""What a provider writes: a mission draft, and a sabotage of it.

The openai provider derives its structured-output JSON schemas from these types, so the
model's answer decodes straight into them (or fails as malformed).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Files = dict[str, str]  # relative path -> file content


class MissionDraft(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    brief: Annotated[str, msgspec.Meta(min_length=1)]
    # The correct project. For language `none`, the correct document(s).
    gold_files: Files
    # The tests a candidate runs; empty for language `none`.
    test_files: Files
    # Tests no candidate ever sees, run only when a candidate's fix is graded, so that a fix
    # which special-cases the visible tests fails; empty for language `none`.
    hidden_test_files: Files = {}


class SabotageDraft(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Every gold file, one of them with the bug planted; test files are never touched.
    sabotaged_files: Files
    # What is wrong and where: for reviewers and graders only, never shown to candidates.
    bug_summary: Annotated[str, msgspec.Meta(min_length=1)]
    grader_hint: str
