-- The replenisher counts, per mission, the variant jobs under way before it orders more: this
-- index holds only those, however long the history of jobs grows.
CREATE INDEX generation_jobs_variant_of ON generation_jobs (variant_of)
    WHERE variant_of IS NOT NULL AND status IN ('pending', 'generating');
