-- Protocol messages (AMP/1.0, DESIGN §9.2): mail of kind 'protocol' whose
-- payload is an envelope. The translation of sqlite/0005: the envelope's
-- ids and the ACK it asks for are columns, so lookups by msg_id and task,
-- msg_id uniqueness and the ACK deadline sweep are indexed, and the rules
-- hold in the database too:
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
-- operator). PostgreSQL adds the columns and changes the CHECK in place
-- where SQLite rebuilds the table.

ALTER TABLE messages
    ADD COLUMN msg_id          TEXT,
    ADD COLUMN task_id         TEXT,
    ADD COLUMN protocol_type   TEXT,
    ADD COLUMN ack_required    BIGINT NOT NULL DEFAULT 0 CONSTRAINT messages_ack_required_check CHECK (ack_required IN (0, 1)),
    ADD COLUMN ack_timeout_sec BIGINT NOT NULL DEFAULT 0 CONSTRAINT messages_ack_timeout_sec_check CHECK (ack_timeout_sec >= 0),
    ADD COLUMN ack_state       TEXT NOT NULL DEFAULT 'none' CONSTRAINT messages_ack_state_check
                                   CHECK (ack_state IN ('none', 'pending', 'acked', 'overdue', 'cancelled')),
    ADD COLUMN ack_due_at      BIGINT,
    ADD COLUMN acked_at        BIGINT;

-- Mail of kind protocol stored before this migration was never checked as
-- an envelope: it gets a msg_id of its own that no envelope can have, and
-- no task.
UPDATE messages SET msg_id = 'legacy-' || id WHERE kind = 'protocol';

ALTER TABLE messages DROP CONSTRAINT messages_session_seq_check,
    ADD CONSTRAINT messages_session_seq_check CHECK ((state = 'queued') = (session_seq IS NULL)
        OR (state = 'done' AND session_seq IS NULL AND (recipient = 'operator' OR ack_state = 'cancelled'))),
    ADD CONSTRAINT messages_msg_id_check CHECK ((kind = 'protocol') = (msg_id IS NOT NULL)),
    ADD CONSTRAINT messages_protocol_check CHECK (kind = 'protocol' OR (task_id IS NULL AND protocol_type IS NULL)),
    ADD CONSTRAINT messages_ack_check CHECK ((ack_required = 1) = (ack_state <> 'none')),
    ADD CONSTRAINT messages_ack_timeout_check CHECK (ack_required = 0 OR ack_timeout_sec > 0),
    ADD CONSTRAINT messages_acked_at_check CHECK ((ack_state = 'acked') = (acked_at IS NOT NULL)),
    ADD CONSTRAINT messages_ack_due_at_check CHECK (ack_state <> 'overdue' OR ack_due_at IS NOT NULL);

CREATE UNIQUE INDEX messages_msg_id ON messages (msg_id) WHERE msg_id IS NOT NULL;
CREATE INDEX messages_task ON messages (task_id, id) WHERE task_id IS NOT NULL;
-- The deadline sweep: pending ACKs by deadline.
CREATE INDEX messages_ack_due ON messages (ack_due_at) WHERE ack_state = 'pending';
