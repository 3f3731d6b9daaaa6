DROP INDEX IF EXISTS invocations_request;
CREATE TABLE IF NOT EXISTS invocation_batches (
    id         text        PRIMARY KEY,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS invocation_batches_written_at ON invocation_batches (written_at);
