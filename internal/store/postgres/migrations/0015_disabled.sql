-- 0015_disabled lets an administrator disable a user or a team, as the
-- sqlite driver's 0015_disabled does. NULL: enabled.
ALTER TABLE teams ADD COLUMN disabled_at timestamptz;
ALTER TABLE users ADD COLUMN disabled_at timestamptz;
