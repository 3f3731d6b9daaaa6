-- One index keeps records unique and walks a function's listing: the
-- request id after the start time (a caller may reuse a request id; its
-- calls differ in start time). Keyed by function first, a batch's rows
-- land at the ends of a few ranges, not at random places in a B-tree
-- keyed by random request ids, and one B-tree fewer is kept up per row
-- (bench/invoke: about 1.4 times the rate). Listings now order the
-- records of one start time by request id.
CREATE UNIQUE INDEX invocations_function_request
    ON invocations (namespace, function, started_at DESC, request_id DESC);
DROP INDEX IF EXISTS invocations_request;
DROP INDEX IF EXISTS invocations_function_time;
