-- How many times a durable run's event log was started over (each attempt of a
-- run that went on after its process died writes the log anew): a stream that
-- follows the run sees the number change and knows the rows it read are gone.
ALTER TABLE runs ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
