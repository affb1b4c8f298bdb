-- The merge queue (DESIGN §14). PostgreSQL has the same number:
-- postgres/0013.
--
-- A candidate is an agent's branch at a commit, waiting to land on the
-- base branch. It moves queued -> testing -> landed | conflict | failed |
-- cancelled (testing -> queued for a retest) through the fsm table in
-- package merge; each move is an event (subject_kind 'merge', subject the
-- candidate's id, agent the candidate's agent).
CREATE TABLE merge_candidates (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT NOT NULL CHECK (length(agent) > 0),
    commit_sha  TEXT NOT NULL CHECK (length(commit_sha) BETWEEN 4 AND 64),
    source      TEXT NOT NULL CHECK (source IN ('land', 'item', 'qa')),
    item        TEXT NOT NULL DEFAULT '',
    requested_by TEXT NOT NULL CHECK (length(requested_by) > 0),
    state       TEXT NOT NULL CHECK (state IN ('queued', 'testing', 'landed', 'conflict', 'failed', 'cancelled')),
    reason      TEXT NOT NULL DEFAULT '',
    files       TEXT NOT NULL DEFAULT '[]', -- JSON: the conflicting files
    ci_tail     TEXT NOT NULL DEFAULT '',
    batch       TEXT NOT NULL DEFAULT '',   -- the landing key of the batch that tested it last
    ci_runs     INTEGER NOT NULL DEFAULT 0 CHECK (ci_runs >= 0),
    claim       TEXT NOT NULL DEFAULT '',   -- the holder testing it; '' while queued
    claimed_at  INTEGER,
    landed_as   TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX merge_candidates_state ON merge_candidates (state, id);
-- One live candidate per agent and commit: landing it again while it is
-- queued is refused (the store says which candidate it is).
CREATE UNIQUE INDEX merge_candidates_live ON merge_candidates (agent, commit_sha) WHERE state IN ('queued', 'testing');

-- Events learn the new subject kind; SQLite rebuilds the table.
CREATE TABLE events_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('agent', 'item', 'escalation', 'team', 'merge')),
    subject      TEXT NOT NULL,
    agent        TEXT, -- set for agent events (= subject), and for subjects that belong to one agent
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    cause        TEXT NOT NULL DEFAULT '',
    session_seq  INTEGER NOT NULL DEFAULT 0,
    CHECK (subject_kind <> 'agent' OR agent = subject)
);
INSERT INTO events_new (id, at, subject_kind, subject, agent, from_state, to_state, cause, session_seq)
    SELECT id, at, subject_kind, subject, agent, from_state, to_state, cause, session_seq FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_agent ON events (agent, id);
CREATE INDEX events_subject ON events (subject_kind, subject, id);
