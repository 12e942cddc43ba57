-- 0007 changes nothing here. The PostgreSQL driver's 0007 numbers the
-- nodes so that its exclusion constraint compares integers; SQLite has no
-- such constraint (the commit's own re-check, under its single writer,
-- guards allocations) and keeps node names. The number stays so that
-- both engines count their migrations alike.
SELECT 1;
