-- 0015_disabled lets an administrator disable a user or a team: its tokens
-- and access keys stop authenticating, and a disabled team buys nothing,
-- until it is enabled again. NULL: enabled.
ALTER TABLE teams ADD COLUMN disabled_at INTEGER;
ALTER TABLE users ADD COLUMN disabled_at INTEGER;
