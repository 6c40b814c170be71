-- When the process running a run last said it was alive (Unix milliseconds): a
-- run `running` whose owner stopped saying so is one a process on another host
-- left behind when it died (a process on this host is checked directly).
ALTER TABLE runs ADD COLUMN alive_ms BIGINT;
