-- 0019 keeps only the allocations of live blocks, in one b-tree ordered
-- as the overlap re-check reads them (node, GPU, end), instead of a
-- table keyed by block and a second, partial, index of the live rows:
-- each GPU a purchase takes is written once, not twice, and the rows of
-- blocks that hold nothing any more (cancelled, ended) are gone. A
-- commit finds a block's rows from the block: its stored placements and
-- end (see allocations.go). The name is the PostgreSQL driver's 0019,
-- which also stores fewer allocation rows (one per block and node).
CREATE TABLE allocations_live (
    node       TEXT NOT NULL,
    gpu        INTEGER NOT NULL,
    end_time   INTEGER NOT NULL,
    block_id   TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    PRIMARY KEY (node, gpu, end_time, block_id)
) WITHOUT ROWID;
INSERT INTO allocations_live (node, gpu, end_time, block_id, start_time)
    SELECT node, gpu, end_time, block_id, start_time FROM allocations WHERE live = 1;
DROP TABLE allocations;
ALTER TABLE allocations_live RENAME TO allocations;
