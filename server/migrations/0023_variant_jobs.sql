-- The replenisher counts, per mission, the variant jobs under way and those that failed before
-- it orders more: this index holds only variant jobs, however many mission jobs there are.
CREATE INDEX generation_jobs_variant_of ON generation_jobs (variant_of, status)
    WHERE variant_of IS NOT NULL;
