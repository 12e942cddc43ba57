-- 0019 stores one allocation row per (block, node) instead of one per
-- GPU: gpus is the set of the node's GPUs that the block holds there, as
-- ranges of GPU indexes ({[0,8)} for a whole node of eight). A purchase
-- of whole nodes wrote eight rows a node, each with its primary key,
-- its foreign key check and its entry in the exclusion constraint's
-- GiST index, and those rows were most of the database's work per
-- purchase; it now writes one. The guarantee is the same: no two live
-- rows of one node share a GPU (gpus &&) over intersecting ranges.
ALTER TABLE allocations DROP CONSTRAINT allocations_no_overlap;
ALTER TABLE allocations RENAME TO allocations_by_gpu;
CREATE TABLE allocations (
    block_id text COLLATE "C" NOT NULL REFERENCES blocks (id),
    node     integer NOT NULL,
    gpus     int4multirange NOT NULL,
    during   tstzrange NOT NULL,
    live     boolean NOT NULL,
    PRIMARY KEY (block_id, node),
    CONSTRAINT allocations_no_overlap
        EXCLUDE USING gist (node WITH =, gpus WITH &&, during WITH &&) WHERE (live)
        DEFERRABLE INITIALLY DEFERRED
);
-- The rows of one block on one node share their range and liveness: a
-- commit writes or changes all of a block's rows at once.
INSERT INTO allocations (block_id, node, gpus, during, live)
    SELECT block_id, node, range_agg(int4range(gpu, gpu + 1)), during, live
    FROM allocations_by_gpu GROUP BY block_id, node, during, live;
DROP TABLE allocations_by_gpu;
