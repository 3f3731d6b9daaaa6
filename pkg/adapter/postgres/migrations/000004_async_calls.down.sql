DROP TABLE IF EXISTS async_idempotency_keys;
DROP TABLE IF EXISTS async_calls;
