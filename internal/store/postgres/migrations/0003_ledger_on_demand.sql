-- 0003 records, with each ledger entry, the instance type it paid for and
-- what the same instance-hours cost on demand, so spend reports can show
-- the savings.
ALTER TABLE ledger ADD COLUMN instance_type text NOT NULL DEFAULT '';
ALTER TABLE ledger ADD COLUMN on_demand_minor bigint NOT NULL DEFAULT 0;
