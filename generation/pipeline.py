"""The mission pipeline a worker runs for a claimed job: write the mission, prove its gold
(against its tests and its hidden tests), plant a bug, prove the sabotage (planting again when
a proof refuses it) and record what it does to the hidden tests, and store the mission with
its proof in the job's final transaction.

A variant job (one the replenisher ordered for an approved mission) writes nothing new: it
plants another bug in that mission, through the same provider and the same ledger, proves it
against the mission's tests as the first bug was proven (the gold's runs are the mission's own:
the same files and tests), and stores it as the mission's next variant. A bug the mission
holds already is planted again, as a failed proof is.

A rendering job makes the renderings a live variant lacks (`generation.rendering_jobs`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg

from core.domains import Domain, DomainMap
from core.sql import Connection, outlasting_outages
from generation import jobs, rendering_jobs
from generation.drafts import MissionDraft, SabotageDraft
from generation.finisher import Ending, Failed, Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.offline import ProceduralSaboteur
from generation.provider import BugPlanter, Provider, ProviderError
from generation.worker import GenerationFailed
from qa import missions, rendered
from qa.policy import judge_gold, judge_sabotage, needs_proof
from qa.proof import ProofUnavailable, Prover
from qa.results import ProofRun, Trust

# Serves an approved mission (its id) to the user whose interactive job (its id) asked for
# it, inside the job's final transaction; the instance id, or None if it could not be served.
# The pool provides it (generation does not import the pool).
ServeWaitingUser = Callable[[Connection, int, int], Awaitable[int | None]]
# What a job works on when it writes no mission: a mission to vary, or a variant to render.
_Target = missions.MissionToVary | rendered.VariantToRender


class MissionPipeline:
    def __init__(
        self,
        *,
        db: asyncpg.Pool,
        provider: Provider,
        prover: Prover | None,
        trust: Trust,
        domain_map: DomainMap,
        sabotage_tries: int,
        serve_waiting_user: ServeWaitingUser,
    ) -> None:
        self._db = db
        self._provider = provider
        self._prover = prover
        self._trust = trust
        self._domain_map = domain_map
        self._sabotage_tries = sabotage_tries
        self._serve_waiting_user = serve_waiting_user
        self._saboteur = ProceduralSaboteur()

    def unavailable(self, domain: Domain) -> str | None:
        """Why this worker cannot make missions of `domain`, or None when it can."""
        if not needs_proof(domain):
            return None
        if self._prover is None:
            return "no proof runner is configured"
        return self._prover.availability(domain.language, self._trust)

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Ending:
        domain = self._domain_map.domains.get(job.domain)
        if domain is None:
            raise GenerationFailed(f"domain {job.domain!r} is not in the domain map any more")
        problem = self.unavailable(domain)
        if problem is not None:
            raise GenerationFailed(f"domain {domain.name} is disabled on this worker: {problem}")
        target = await self._target(job)
        if isinstance(target, rendered.VariantToRender):
            assert self._prover is not None  # a domain with code: unavailable() said so
            return await rendering_jobs.render(job, domain, target, self._prover, self._trust)
        if target is not None:
            return await self._vary(job, domain, target, ledger)
        try:
            draft = await self._provider.write_mission(domain, seed=job.id, ledger=ledger)
            if needs_proof(domain):
                sabotage, proof = await self._prove(domain, draft, job, ledger)
            else:
                sabotage = await self._provider.plant_bug(
                    domain, draft, seed=job.id, try_number=1, ledger=ledger
                )
                proof = missions.no_code_proof()
        except (ProviderError, ProofUnavailable) as error:
            raise GenerationFailed(str(error)) from error
        return self._storing(job, domain, draft, sabotage, proof)

    async def _prove(
        self, domain: Domain, draft: MissionDraft, job: ClaimedJob, ledger: Ledger
    ) -> tuple[SabotageDraft, missions.MissionProof]:
        if not draft.hidden_test_files:
            raise GenerationFailed("the mission has no hidden tests, so no fix could be graded")
        gold, hidden_gold = await self._run_both(domain, draft.gold_files, draft)
        assert hidden_gold is not None  # the mission has hidden tests
        verdict = judge_gold(gold)
        if not verdict.accepted:
            raise GenerationFailed(f"the gold solution failed its own tests: {verdict.reason}")
        hidden_verdict = judge_gold(hidden_gold)
        if not hidden_verdict.accepted:
            raise GenerationFailed(
                f"the gold solution failed its hidden tests: {hidden_verdict.reason}"
            )
        return await self._plant(
            domain, draft, gold, hidden_gold, job, ledger, known=[], planter=self._provider
        )

    async def _plant(
        self,
        domain: Domain,
        draft: MissionDraft,
        gold: ProofRun,
        hidden_gold: ProofRun | None,
        job: ClaimedJob,
        ledger: Ledger,
        *,
        known: list[dict[str, str]],
        planter: BugPlanter,
    ) -> tuple[SabotageDraft, missions.MissionProof]:
        """A bug from `planter`, not one of the `known` ones, whose sabotage fails as the domain
        asks; what it does to the hidden tests is recorded (a mission proven before them has
        none)."""
        tries: list[ProofRun] = []
        reason = "no try planted a bug the mission does not hold already"
        for try_number in range(1, self._sabotage_tries + 1):
            sabotage = await planter.plant_bug(
                domain, draft, seed=job.id, try_number=try_number, ledger=ledger
            )
            if sabotage.sabotaged_files in known:
                continue  # proving it again would prove nothing new
            visible, hidden_sabotage = await self._run_both(domain, sabotage.sabotaged_files, draft)
            tries.append(visible)
            verdict = judge_sabotage(visible, domain.sabotage_must_fail)
            if verdict.accepted:
                proof = missions.MissionProof(
                    gold=gold,
                    sabotage_tries=tries,
                    verdict=verdict.reason,
                    hidden_gold=hidden_gold,
                    hidden_sabotage=hidden_sabotage,
                )
                return sabotage, proof
            reason = verdict.reason
        raise GenerationFailed(
            f"no planted bug passed its proof in {self._sabotage_tries} tries; the last: {reason}"
        )

    async def _target(self, job: ClaimedJob) -> _Target | None:
        """The approved mission a variant job plants another bug in, or the variant a rendering
        job renders; None for a mission job. Read again through a database outage, as the
        ledger's writes are: nothing is wrong with the job."""

        async def read() -> tuple[jobs.JobTarget, _Target | None]:
            async with self._db.acquire() as connection:
                target = await jobs.target(connection, job.id)
                if target.rendering_of is not None:
                    return target, await rendered.to_render(connection, target.rendering_of)
                if target.variant_of is not None:
                    return target, await missions.to_vary(connection, target.variant_of)
                return target, None

        target, found = await outlasting_outages(read, what=f"job {job.id}'s target")
        if target.rendering_of is not None and found is None:
            raise GenerationFailed(
                f"variant {target.rendering_of} is no longer served; no rendering is needed"
            )
        if target.variant_of is not None and found is None:
            raise GenerationFailed(
                f"mission {target.variant_of} is no longer served; no bug is needed"
            )
        return found

    async def _vary(
        self, job: ClaimedJob, domain: Domain, target: missions.MissionToVary, ledger: Ledger
    ) -> Ending:
        if not needs_proof(domain) or target.gold is None:
            raise GenerationFailed(
                f"mission {target.id} has no code to prove a bug in; it has one flaw, reviewed "
                "by a person"
            )
        draft = MissionDraft(
            title=target.title,
            brief=target.brief,
            gold_files=target.gold_files,
            test_files=target.test_files,
            hidden_test_files=target.hidden_test_files,
        )
        # The domain says where its variants come from: the model, or the procedural saboteur.
        planter = self._saboteur if domain.variant_source == "saboteur" else self._provider
        try:
            sabotage, proof = await self._plant(
                domain,
                draft,
                target.gold,
                target.hidden_gold,
                job,
                ledger,
                known=target.known_bugs,
                planter=planter,
            )
        except (ProviderError, ProofUnavailable) as error:
            raise GenerationFailed(str(error)) from error

        async def store(connection: Connection) -> Finished | Failed:
            variant_id = await missions.store_variant(
                connection,
                domain=domain,
                mission_id=target.id,
                sabotaged_files=sabotage.sabotaged_files,
                bug_summary=sabotage.bug_summary,
                grader_hint=sabotage.grader_hint,
                proof=proof,
                provider=planter.name,
                job_id=job.id,
                max_serves=domain.variant_serves(target.max_serves),
            )
            if variant_id is None:
                return Failed(f"planted a bug that mission {target.id} holds already; discarded")
            return Finished(status="completed", mission_id=target.id)

        return store

    async def _run(
        self, domain: Domain, solution: dict[str, str], tests: dict[str, str]
    ) -> ProofRun:
        assert self._prover is not None  # unavailable() said so before
        return await self._prover.run(domain.language, solution, tests, trust=self._trust)

    async def _run_both(
        self, domain: Domain, solution: dict[str, str], draft: MissionDraft
    ) -> tuple[ProofRun, ProofRun | None]:
        """The solution against the visible tests and, where the mission has them, the hidden
        ones, both at once in two slots: a proof waits for the longer run, not for both in
        turn. Once one fails to run, the other is stopped: no sandbox outlives the proof."""
        suites = (
            [draft.test_files, draft.hidden_test_files]
            if draft.hidden_test_files
            else [draft.test_files]
        )
        runs = [asyncio.ensure_future(self._run(domain, solution, tests)) for tests in suites]
        try:
            results = await asyncio.gather(*runs)
        except Exception:
            # Cancelled, gather stops both itself; cancelling again would interrupt their
            # clean-up.
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)
            raise
        return results[0], results[1] if len(results) > 1 else None

    def _storing(
        self,
        job: ClaimedJob,
        domain: Domain,
        draft: MissionDraft,
        sabotage: SabotageDraft,
        proof: missions.MissionProof,
    ) -> Callable[[Connection], Awaitable[Finished | Failed]]:
        async def store(connection: Connection) -> Finished | Failed:
            mission_id = await missions.store(
                connection,
                domain=domain,
                title=draft.title,
                brief=draft.brief,
                gold_files=draft.gold_files,
                test_files=draft.test_files,
                hidden_test_files=draft.hidden_test_files,
                sabotaged_files=sabotage.sabotaged_files,
                bug_summary=sabotage.bug_summary,
                grader_hint=sabotage.grader_hint,
                proof=proof,
                provider=self._provider.name,
                prompt_version=self._provider.prompt_version,
                job_id=job.id,
                requested_by=job.user_id,
                max_serves=domain.serve_limit(job.id),
                proven=needs_proof(domain),
            )
            if mission_id is None:
                return Failed("made a mission identical to one already in the pool; discarded")
            if job.lane == "replenish":
                return Finished(status="completed", mission_id=mission_id)
            if needs_proof(domain) and domain.review == "proof":
                instance_id = await self._serve_waiting_user(connection, mission_id, job.id)
                return Finished(status="completed", mission_id=mission_id, instance_id=instance_id)
            return Finished(status="awaiting_review", mission_id=mission_id)

        return store
