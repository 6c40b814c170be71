-- Who runs a run, and what may be redeemed once.
--
-- `instances`: one row per process that runs runs (a server, a worker, an
-- `agent chat`), named by a random id it draws at start, never by its host or
-- process id. It is alive while its lease holds: it moves `lease_until_ms`
-- forward every few seconds; a run whose owner's lease ran out is one a dead (or
-- stalled) process left, and another process may take it.
--
-- `runs.lease_gen`: the run's fencing generation, raised each time another
-- process takes the run over. A step is recorded only under the generation its
-- writer holds, in the transaction that records it, so a process that lost a
-- run (paused past its lease, then resumed) records nothing more of it and so
-- runs none of its calls that act.
--
-- `redemptions`: what is used once (a sealed run submission bound to the
-- invocation that first presented it, a sealed approval of a paused run),
-- whichever process redeems it.

CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    lease_until_ms BIGINT NOT NULL,
    started_ms BIGINT NOT NULL
);

ALTER TABLE runs ADD COLUMN lease_gen BIGINT NOT NULL DEFAULT 0;

CREATE TABLE redemptions (
    tag TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);

-- The key that sealed Restate submissions lived here, readable by whoever reads
-- the store; it now lives in a key file only its user reads.
DELETE FROM server_keys WHERE name = 'run-submissions';
