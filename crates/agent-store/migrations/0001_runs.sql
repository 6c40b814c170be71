-- The run store's tables. Portable SQL (SQLite 3.24+ and Postgres 13+): text ids,
-- BIGINT counters and Unix milliseconds, JSON kept as TEXT. Every row carries the
-- account it belongs to, first in every key, so no query can reach across accounts
-- by forgetting a filter on a secondary index.

CREATE TABLE threads (
    account_id TEXT NOT NULL,
    id TEXT NOT NULL,
    title TEXT NOT NULL,
    graph TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX threads_by_updated ON threads (account_id, updated_ms);

-- A thread's messages as the model saw them (`ai_core::Message` JSON), in order.
CREATE TABLE thread_messages (
    account_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    run_id TEXT,
    message TEXT NOT NULL,
    PRIMARY KEY (account_id, thread_id, seq)
);

CREATE TABLE runs (
    account_id TEXT NOT NULL,
    id TEXT NOT NULL,
    thread_id TEXT,
    graph TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_hash TEXT,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    error TEXT,
    started_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX runs_by_thread ON runs (account_id, thread_id, started_ms);
CREATE INDEX runs_by_owner ON runs (owner, status);

-- The append-only event log (`ai_core::AiEvent` JSON, redacted before it is written).
CREATE TABLE run_events (
    account_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (account_id, run_id, seq)
);

-- One row per model call; cost in millionths of the pricing currency, when known.
CREATE TABLE usage_facts (
    account_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    call_seq BIGINT NOT NULL,
    thread_id TEXT,
    model TEXT NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cached_tokens BIGINT,
    cache_creation_tokens BIGINT,
    reasoning_tokens BIGINT,
    cost_micros BIGINT,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, run_id, call_seq)
);
CREATE INDEX usage_by_time ON usage_facts (account_id, at_ms);

-- A run paused on approvals or client tool outputs: its serialized state.
CREATE TABLE paused_runs (
    account_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (account_id, run_id)
);
