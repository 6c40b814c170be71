-- What the servers sharing a store share: named secrets (the approval key, so an
-- approval id issued by one server is honoured by another and after a restart)
-- and the approval ids already used (each once, whichever server redeems it).

CREATE TABLE server_keys (
    name TEXT PRIMARY KEY,
    secret TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);

CREATE TABLE used_approvals (
    tag TEXT PRIMARY KEY,
    expires_s BIGINT NOT NULL
);
CREATE INDEX used_approvals_by_expiry ON used_approvals (expires_s);
