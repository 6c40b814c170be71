-- The running runs, found without reading every run.
--
-- Each process looks for orphans (running runs whose owner's lease ran out)
-- every lease renewal: with no index on the status, that read went through
-- every run the store ever held. The index holds the running runs only, in
-- the order orphans are taken.

CREATE INDEX runs_running ON runs (started_ms) WHERE status = 'running';
