-- 0008 indexes events by team: a member's feed reads its own team's
-- events after a cursor (a seek), not every team's events since then.
CREATE INDEX events_by_team ON events (team, seq);
