-- Durable runs: the journal of each run's steps (a model call's turn, the intent
-- of a call that acts, a tool call's result; JSON the loop reads back), and how
-- each durable run starts (JSON its server reads back to start it again after
-- its process died). Written before the step that follows them.

CREATE TABLE run_steps (
    account_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step BIGINT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, run_id, step, kind)
);

CREATE TABLE run_starts (
    account_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    start TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, run_id)
);
