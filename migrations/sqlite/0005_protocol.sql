-- Protocol messages (AMP/1.0, DESIGN §9.2): mail of kind 'protocol' whose
-- payload is an envelope. The envelope's ids and the ACK it asks for are
-- columns, so lookups by msg_id and task, msg_id uniqueness and the ACK
-- deadline sweep are indexed, and the rules hold in the database too:
--
--   msg_id, task_id   the envelope's ids; NULL for mail that is not protocol
--   protocol_type     the envelope's type (an ack never wakes its recipient)
--   ack_required      1 when the message asks its recipient for an ACK
--   ack_timeout_sec   how long the recipient has, from the first delivery
--   ack_state         none (no ACK asked for), pending, acked, overdue (the
--                     deadline passed and an ack_timeout was raised) or
--                     cancelled (the operator aborted it)
--   ack_due_at        the deadline: set when the message is first delivered
--                     into a session of its recipient, kept across
--                     redeliveries, cleared when the operator resumes it
--   acked_at          when the ACK was stored
--
-- A cancelled message becomes done even when no session completed it, so
-- the delivery CHECK allows done without a session for it (as for mail to
-- operator). SQLite cannot change a CHECK in place: the table is rebuilt as
-- in 0003.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE messages_new (
    id              INTEGER PRIMARY KEY,
    thread_id       INTEGER,
    reply_to        INTEGER REFERENCES messages_new (id) ON DELETE SET NULL,
    sender          TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('message', 'task', 'status', 'nudge', 'protocol')),
    urgency         TEXT NOT NULL CHECK (urgency IN ('normal', 'urgent')),
    body            TEXT NOT NULL CHECK (length(body) > 0),
    payload         TEXT,
    created_at      INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'delivered', 'done')),
    session_seq     INTEGER,
    shown           INTEGER NOT NULL DEFAULT 0 CHECK (shown >= 0),
    delivered_at    INTEGER,
    done_at         INTEGER,
    msg_id          TEXT,
    task_id         TEXT,
    protocol_type   TEXT,
    ack_required    INTEGER NOT NULL DEFAULT 0 CHECK (ack_required IN (0, 1)),
    ack_timeout_sec INTEGER NOT NULL DEFAULT 0 CHECK (ack_timeout_sec >= 0),
    ack_state       TEXT NOT NULL DEFAULT 'none' CHECK (ack_state IN ('none', 'pending', 'acked', 'overdue', 'cancelled')),
    ack_due_at      INTEGER,
    acked_at        INTEGER,
    CHECK (sender <> recipient),
    CHECK ((state = 'queued') = (session_seq IS NULL)
        OR (state = 'done' AND session_seq IS NULL AND (recipient = 'operator' OR ack_state = 'cancelled'))),
    CHECK ((kind = 'protocol') = (msg_id IS NOT NULL)),
    CHECK (kind = 'protocol' OR (task_id IS NULL AND protocol_type IS NULL)),
    CHECK ((ack_required = 1) = (ack_state <> 'none')),
    CHECK (ack_required = 0 OR ack_timeout_sec > 0),
    CHECK ((ack_state = 'acked') = (acked_at IS NOT NULL)),
    CHECK (ack_state <> 'overdue' OR ack_due_at IS NOT NULL)
);
INSERT INTO messages_new (id, thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
        state, session_seq, shown, delivered_at, done_at, msg_id, task_id, protocol_type)
    SELECT id, thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
        state, session_seq, shown, delivered_at, done_at,
        -- Mail of kind protocol stored before this migration was never
        -- checked as an envelope: it gets a msg_id of its own that no
        -- envelope can have, and no task.
        CASE WHEN kind = 'protocol' THEN 'legacy-' || id END,
        NULL, NULL
    FROM messages ORDER BY id;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_inbox ON messages (recipient, state, id);
CREATE UNIQUE INDEX messages_msg_id ON messages (msg_id) WHERE msg_id IS NOT NULL;
CREATE INDEX messages_task ON messages (task_id, id) WHERE task_id IS NOT NULL;
-- The deadline sweep: pending ACKs by deadline.
CREATE INDEX messages_ack_due ON messages (ack_due_at) WHERE ack_state = 'pending';
