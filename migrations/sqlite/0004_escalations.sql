-- Escalations: the operator's desk (DESIGN §9.1), and mail to operator that
-- the operator marks done.
--
-- An escalation moves open -> acked -> resolved through the fsm table in
-- package escalation; each move is an event (subject_kind 'escalation').
-- While it is unresolved, no second escalation with the same dedupe key may
-- exist: a repeat only counts it.

CREATE TABLE escalations (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL CHECK (kind IN (
                         'agent', 'ack_timeout', 'branch_violation', 'hallucination_lock', 'stage_timeout',
                         'ci_failure', 'stalled', 'errors', 'protocol_breach', 'budget', 'repo_tamper', 'approval')),
    severity         TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    state            TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'acked', 'resolved')),
    hold             INTEGER NOT NULL DEFAULT 0 CHECK (hold IN (0, 1)),
    agent            TEXT,          -- the agent it is about; NULL: about nothing in particular
    ref              TEXT,          -- msg:<id>, item:<id>, session:<agent>-<seq>
    summary          TEXT NOT NULL CHECK (length(summary) > 0),
    details          TEXT,          -- a JSON object
    dedupe_key       TEXT NOT NULL,
    count            INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1),
    created_at       INTEGER NOT NULL,
    acked_at         INTEGER,
    resolved_at      INTEGER,
    decision         TEXT CHECK (decision IN ('resume', 'abort', 'approve', 'reject')),
    note             TEXT NOT NULL DEFAULT '',
    shown_in         INTEGER,       -- the agent's session whose prompt carried the decision
    -- The notifier's bookkeeping: the last state announced, when the
    -- opening was, and the reminders sent since.
    notified_state   TEXT NOT NULL DEFAULT '' CHECK (notified_state IN ('', 'open', 'acked', 'resolved')),
    notified_at      INTEGER,
    reminders        INTEGER NOT NULL DEFAULT 0 CHECK (reminders >= 0),
    last_reminded_at INTEGER,
    CHECK ((state = 'resolved') = (resolved_at IS NOT NULL)),
    CHECK (state = 'resolved' OR decision IS NULL),
    CHECK (state <> 'acked' OR acked_at IS NOT NULL),
    CHECK (hold = 0 OR agent IS NOT NULL)
);

CREATE UNIQUE INDEX escalations_unresolved_key ON escalations (dedupe_key) WHERE state <> 'resolved';
CREATE INDEX escalations_agent ON escalations (agent, state, id);
CREATE INDEX escalations_state ON escalations (state, id);

-- Mail to operator becomes done without a session: when the operator
-- replies to it or marks it read. The messages table is rebuilt to allow
-- exactly that (SQLite cannot change a CHECK in place). The new table's
-- reply_to references itself by its new name until the rename, so dropping
-- the old table breaks no foreign key.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE messages_new (
    id           INTEGER PRIMARY KEY,
    thread_id    INTEGER,
    reply_to     INTEGER REFERENCES messages_new (id) ON DELETE SET NULL,
    sender       TEXT NOT NULL,
    recipient    TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'task', 'status', 'nudge', 'protocol')),
    urgency      TEXT NOT NULL CHECK (urgency IN ('normal', 'urgent')),
    body         TEXT NOT NULL CHECK (length(body) > 0),
    payload      TEXT,
    created_at   INTEGER NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'delivered', 'done')),
    session_seq  INTEGER,
    shown        INTEGER NOT NULL DEFAULT 0 CHECK (shown >= 0),
    delivered_at INTEGER,
    done_at      INTEGER,
    CHECK (sender <> recipient),
    CHECK ((state = 'queued') = (session_seq IS NULL)
        OR (recipient = 'operator' AND state = 'done' AND session_seq IS NULL))
);
INSERT INTO messages_new (id, thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
        state, session_seq, shown, delivered_at, done_at)
    SELECT id, thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
        state, session_seq, shown, delivered_at, done_at FROM messages ORDER BY id;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_inbox ON messages (recipient, state, id);
