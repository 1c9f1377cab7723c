-- Replenishment measures each domain's recent serves: this index reads the last day's
-- instances of a domain, however long the history of instances grows.
CREATE INDEX mission_instances_domain_created ON mission_instances (domain, created_at);
