-- Invocation history: one row per call of a function (proxy, cron, queue, job).
CREATE TABLE invocations (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace    text        NOT NULL,
    function     text        NOT NULL,
    revision     text        NOT NULL DEFAULT '',
    trigger      text        NOT NULL,
    request_id   text        NOT NULL,
    started_at   timestamptz NOT NULL,
    duration_us  bigint      NOT NULL,
    status       smallint    NOT NULL,
    status_class smallint    GENERATED ALWAYS AS (status / 100) STORED,
    bytes_in     bigint      NOT NULL DEFAULT 0,
    bytes_out    bigint      NOT NULL DEFAULT 0,
    cold_start   boolean     NOT NULL DEFAULT false,
    error        text        NOT NULL DEFAULT ''
);

-- The listing walks one function's rows newest first; the keyset condition
-- (started_at, id) < (cursor) continues inside the same index range.
CREATE INDEX invocations_function_time
    ON invocations (namespace, function, started_at DESC, id DESC);

-- The same walk filtered by status class (a page of 5xx among millions of
-- 2xx must not scan them all).
CREATE INDEX invocations_function_class_time
    ON invocations (namespace, function, status_class, started_at DESC, id DESC);

-- Retention deletes by age; rows arrive roughly in time order, so a BRIN
-- index finds old ones for a fraction of a B-tree's upkeep.
CREATE INDEX invocations_started_at_brin ON invocations USING brin (started_at);

-- Batches already stored, so that a batch retried after a lost
-- acknowledgement is not stored twice.
CREATE TABLE invocation_batches (
    id         text        PRIMARY KEY,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invocation_batches_written_at ON invocation_batches (written_at);
