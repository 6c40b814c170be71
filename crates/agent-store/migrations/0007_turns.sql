-- One owner for a chat's state.
--
-- `thread_messages.message_id`: the id a UI knows a message by (a user
-- message's id as its client sent it; the id of the answer a run streamed, on
-- the first message the run added), the same live, after a reload and through
-- another server. Messages written before it have none (their position stands
-- in).
--
-- `threads.active_run`: the run a thread's turn belongs to while it runs. A turn
-- is opened only when no other run of the thread is running (a run that ended,
-- paused or was interrupted frees the thread), so two sends to one chat are
-- ordered by the store and no turn is lost.
--
-- `runs.stop_requested`: a Stop asked of any server reaches the run wherever it
-- runs (its process looks at each lease renewal). `runs.submitted_ms`: when a
-- durable engine acknowledged the run's submission (NULL: not yet; a server
-- submits it again, under the run id as idempotency key).
--
-- `call_decisions`: what was decided about a call (approved, denied, a client
-- tool's output), once per (account, thread, call): a later decision for the
-- same call, whichever approval id or request carries it, is answered from this
-- record and runs nothing.

ALTER TABLE thread_messages ADD COLUMN message_id TEXT;

ALTER TABLE threads ADD COLUMN active_run TEXT;

ALTER TABLE runs ADD COLUMN stop_requested BIGINT NOT NULL DEFAULT 0;

ALTER TABLE runs ADD COLUMN submitted_ms BIGINT;

CREATE TABLE call_decisions (
    account_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    run_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, thread_id, tool_call_id)
);
