DROP INDEX IF EXISTS invocations_function_trigger_time;
