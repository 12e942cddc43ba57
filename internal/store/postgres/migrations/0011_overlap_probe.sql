-- 0011 changes nothing here. The SQLite driver's 0011 adds start_time to
-- its index of live allocations, so that its overlap re-check reads one
-- allocation per GPU instead of every later one. Here the exclusion
-- constraint's GiST index already checks each new allocation with one
-- descent to the rows of its GPU whose ranges meet it, whatever the
-- number of rows stored. The number stays so that both engines count
-- their migrations alike.
SELECT 1;
