DROP TABLE IF EXISTS invocation_batches;
DROP TABLE IF EXISTS invocations;
