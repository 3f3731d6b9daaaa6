-- A record is stored once: the recorder's disk spool may hand the same
-- record over again (written just before a crash, replayed after it), and
-- the insert skips it on this key. A caller may reuse a request id; its
-- calls differ in start time. Exact copies stored before are removed first.
DELETE FROM invocations a USING invocations b
 WHERE a.id > b.id
   AND a.request_id = b.request_id AND a.started_at = b.started_at
   AND a.namespace = b.namespace AND a.function = b.function;
CREATE UNIQUE INDEX invocations_request
    ON invocations (request_id, started_at, namespace, function);

-- Batch ids did the same for whole batches; the key above supersedes them.
DROP TABLE IF EXISTS invocation_batches;
