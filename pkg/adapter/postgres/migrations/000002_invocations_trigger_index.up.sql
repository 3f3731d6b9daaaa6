-- The listing filtered by trigger: without it, asking for the cron runs of
-- a function that only ever had http calls walks its whole history.
CREATE INDEX invocations_function_trigger_time
    ON invocations (namespace, function, trigger, started_at DESC, id DESC);
