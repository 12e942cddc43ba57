-- 0007 numbers the nodes: allocations name a node by its number in the
-- nodes table instead of by its name. The exclusion constraint's GiST
-- index compares integers far faster than text (a purchase of two whole
-- nodes wrote its 16 rows in 1.7 ms with names, 0.65 ms with numbers).
--
-- A node's row is written the first time a commit allocates one of its
-- GPUs and is never changed or deleted afterwards, so a number always
-- means the same node. Nothing reads allocations back into blocks (a
-- block's placements are stored with it), so no foreign key is needed to
-- resolve a number, and none is kept: each would cost a lock per row.
CREATE TABLE nodes (
    id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE
);
INSERT INTO nodes (name) SELECT DISTINCT node FROM allocations ORDER BY node;

ALTER TABLE allocations DROP CONSTRAINT allocations_no_overlap;
ALTER TABLE allocations DROP CONSTRAINT allocations_pkey;
ALTER TABLE allocations RENAME COLUMN node TO node_name;
ALTER TABLE allocations ADD COLUMN node integer;
UPDATE allocations a SET node = n.id FROM nodes n WHERE n.name = a.node_name;
ALTER TABLE allocations DROP COLUMN node_name;
ALTER TABLE allocations ALTER COLUMN node SET NOT NULL;
ALTER TABLE allocations ADD PRIMARY KEY (block_id, node, gpu);
ALTER TABLE allocations ADD CONSTRAINT allocations_no_overlap
    EXCLUDE USING gist (node WITH =, gpu WITH =, during WITH &&) WHERE (live)
    DEFERRABLE INITIALLY DEFERRED;
