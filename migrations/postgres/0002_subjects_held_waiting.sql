-- Events about any subject (agents now; workflow items, escalations and the
-- team launch next), and the Held and Waiting lifecycle states. The
-- translation of sqlite/0002: PostgreSQL changes a CHECK and a NOT NULL in
-- place where SQLite rebuilds the table.

ALTER TABLE agents DROP CONSTRAINT agents_state_check,
    ADD CONSTRAINT agents_state_check CHECK (state IN (
        'Stopped', 'Initializing', 'BuildingPrompt', 'Spawning', 'Running',
        'Interrupting', 'SessionComplete', 'Idle', 'CoolingDown', 'Paused',
        'Held', 'Waiting'));

ALTER TABLE events ADD COLUMN subject_kind TEXT, ADD COLUMN subject TEXT;
UPDATE events SET subject_kind = 'agent', subject = agent;
ALTER TABLE events
    ALTER COLUMN subject_kind SET NOT NULL,
    ALTER COLUMN subject SET NOT NULL,
    ALTER COLUMN agent DROP NOT NULL, -- set for agent events (= subject), and for subjects that belong to one agent
    ADD CONSTRAINT events_subject_kind_check CHECK (subject_kind IN ('agent', 'item', 'escalation', 'team')),
    ADD CONSTRAINT events_agent_subject_check CHECK (subject_kind <> 'agent' OR agent = subject);
CREATE INDEX events_subject ON events (subject_kind, subject, id);
