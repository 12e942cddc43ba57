-- 0011 lets the overlap re-check of a commit read one allocation per GPU
-- instead of every later one. allocations_taken now also holds start_time,
-- so the re-check finds the first live allocation of a GPU that ends after
-- a new one starts, and whether it starts before the new one ends, from
-- the index alone: a seek, whatever the number of allocations of the GPU
-- (see findOverlapSQL in stmts.go).
DROP INDEX allocations_taken;
CREATE INDEX allocations_taken ON allocations (node, gpu, end_time, start_time) WHERE live = 1;
