-- File reservations (DESIGN §14): an agent's advisory lease on the files a
-- glob matches, shown in teammates' prompts, expired by the supervisor and
-- released on retire. PostgreSQL has the same number and name.
--
-- A row is held while released_at is NULL; it is live while it is held and
-- its expires_at (NULL: no expiry) is still ahead. An agent holds a glob at
-- most once: reserving it again refreshes the held row.
CREATE TABLE reservations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT NOT NULL CHECK (length(agent) > 0),
    glob        TEXT NOT NULL CHECK (length(glob) > 0),
    exclusive   INTEGER NOT NULL DEFAULT 0 CHECK (exclusive IN (0, 1)),
    reason      TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    released_at INTEGER
);

CREATE UNIQUE INDEX reservations_held ON reservations (agent, glob) WHERE released_at IS NULL;
CREATE INDEX reservations_expiry ON reservations (expires_at) WHERE released_at IS NULL;

-- The escalation kind 'reservation': a session committed to a file under a
-- teammate's exclusive reservation. SQLite cannot widen a CHECK in place,
-- so the table is rebuilt (nothing references it), keeping its ids and its
-- AUTOINCREMENT sequence, so no id is ever used twice.
CREATE TABLE escalations_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL CHECK (kind IN (
                         'agent', 'ack_timeout', 'branch_violation', 'hallucination_lock', 'stage_timeout',
                         'ci_failure', 'stalled', 'errors', 'protocol_breach', 'budget', 'repo_tamper', 'approval',
                         'reservation')),
    severity         TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    state            TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'acked', 'resolved')),
    hold             INTEGER NOT NULL DEFAULT 0 CHECK (hold IN (0, 1)),
    agent            TEXT,
    ref              TEXT,
    summary          TEXT NOT NULL CHECK (length(summary) > 0),
    details          TEXT,
    dedupe_key       TEXT NOT NULL,
    count            INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1),
    created_at       INTEGER NOT NULL,
    acked_at         INTEGER,
    resolved_at      INTEGER,
    decision         TEXT CHECK (decision IN ('resume', 'abort', 'approve', 'reject')),
    note             TEXT NOT NULL DEFAULT '',
    shown_in         INTEGER,
    notified_state   TEXT NOT NULL DEFAULT '' CHECK (notified_state IN ('', 'open', 'acked', 'resolved')),
    notified_at      INTEGER,
    reminders        INTEGER NOT NULL DEFAULT 0 CHECK (reminders >= 0),
    last_reminded_at INTEGER,
    CHECK ((state = 'resolved') = (resolved_at IS NOT NULL)),
    CHECK (state = 'resolved' OR decision IS NULL),
    CHECK (state <> 'acked' OR acked_at IS NOT NULL),
    CHECK (hold = 0 OR agent IS NOT NULL)
);
INSERT INTO escalations_new (id, kind, severity, state, hold, agent, ref, summary, details, dedupe_key, count,
        created_at, acked_at, resolved_at, decision, note, shown_in, notified_state, notified_at, reminders, last_reminded_at)
    SELECT id, kind, severity, state, hold, agent, ref, summary, details, dedupe_key, count,
        created_at, acked_at, resolved_at, decision, note, shown_in, notified_state, notified_at, reminders, last_reminded_at
    FROM escalations ORDER BY id;
-- The old table's sequence (ids of deleted rows included) carries over.
DELETE FROM sqlite_sequence WHERE name = 'escalations_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'escalations_new', seq FROM sqlite_sequence WHERE name = 'escalations';
DROP TABLE escalations;
ALTER TABLE escalations_new RENAME TO escalations;
CREATE UNIQUE INDEX escalations_unresolved_key ON escalations (dedupe_key) WHERE state <> 'resolved';
CREATE INDEX escalations_agent ON escalations (agent, state, id);
CREATE INDEX escalations_state ON escalations (state, id);
