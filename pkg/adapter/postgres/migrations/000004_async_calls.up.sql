-- Asynchronous calls (Prefer: respond-async) of sless api's replicas: the
-- request, the state of its run and the function's answer. Any replica
-- reads a call here; RabbitMQ carries the refs of the calls still to run.
CREATE TABLE async_calls (
    namespace          text        NOT NULL,
    function           text        NOT NULL,
    request_id         text        NOT NULL,
    state              text        NOT NULL,
    attempts           integer     NOT NULL DEFAULT 0,
    failures           integer     NOT NULL DEFAULT 0,
    accepted_at        timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    next_attempt_at    timestamptz,
    last_error         text        NOT NULL DEFAULT '',
    idempotency_key    text        NOT NULL DEFAULT '',
    -- The request without its body, as JSON; the body apart.
    request            jsonb       NOT NULL,
    request_body       bytea,
    response_status    integer,
    response_headers   jsonb,
    -- The answer's body up to the inline size; past it, in the blob store
    -- under response_body_key.
    response_body      bytea,
    response_body_key  text,
    response_bytes     bigint,
    response_truncated boolean     NOT NULL DEFAULT false,
    callback           jsonb,
    -- When the call's next step (an attempt, or the posting of its result)
    -- is due; NULL: none. A replica holds a step until lease_until;
    -- swept_at is when a lost ref was last queued again.
    due_at             timestamptz,
    lease_until        timestamptz,
    swept_at           timestamptz,
    PRIMARY KEY (namespace, function, request_id)
);

-- A function's calls newest first, the cursor continuing inside the range.
CREATE INDEX async_calls_listing ON async_calls (namespace, function, accepted_at DESC, request_id DESC);
-- The sweep for lost refs walks only the calls with a step to take.
CREATE INDEX async_calls_due ON async_calls (due_at) WHERE due_at IS NOT NULL;
-- A claim counts the running calls of its function.
CREATE INDEX async_calls_running ON async_calls (namespace, function) WHERE state = 'running';
-- Retention deletes finished calls by age.
CREATE INDEX async_calls_finished ON async_calls (finished_at) WHERE finished_at IS NOT NULL;

-- An Idempotency-Key names its first call for a window (24 h), per
-- function, whichever replica took the repeat.
CREATE TABLE async_idempotency_keys (
    namespace  text        NOT NULL,
    function   text        NOT NULL,
    key        text        NOT NULL,
    request_id text        NOT NULL,
    taken_at   timestamptz NOT NULL,
    PRIMARY KEY (namespace, function, key)
);
CREATE INDEX async_idempotency_keys_taken_at ON async_idempotency_keys (taken_at);
