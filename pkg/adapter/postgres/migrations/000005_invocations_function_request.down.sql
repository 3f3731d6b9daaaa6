CREATE INDEX IF NOT EXISTS invocations_function_time
    ON invocations (namespace, function, started_at DESC, id DESC);
CREATE UNIQUE INDEX IF NOT EXISTS invocations_request
    ON invocations (request_id, started_at, namespace, function);
DROP INDEX IF EXISTS invocations_function_request;
