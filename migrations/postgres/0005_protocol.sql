-- Protocol messages (AMP/1.0): a translation of sqlite/0005_protocol.sql,
-- which rebuilds the table; here the columns and constraints are altered in
-- place. See the SQLite file for what each column means.

ALTER TABLE messages
    ADD COLUMN msg_id          TEXT,
    ADD COLUMN task_id         TEXT,
    ADD COLUMN protocol_type   TEXT,
    ADD COLUMN ack_required    BIGINT NOT NULL DEFAULT 0 CHECK (ack_required IN (0, 1)),
    ADD COLUMN ack_timeout_sec BIGINT NOT NULL DEFAULT 0 CHECK (ack_timeout_sec >= 0),
    ADD COLUMN ack_state       TEXT NOT NULL DEFAULT 'none' CONSTRAINT messages_ack_state_check
                                   CHECK (ack_state IN ('none', 'pending', 'acked', 'overdue', 'cancelled')),
    ADD COLUMN ack_due_at      BIGINT,
    ADD COLUMN acked_at        BIGINT;

-- Mail of kind protocol stored before this migration was never checked as
-- an envelope: it gets a msg_id of its own that no envelope can have.
UPDATE messages SET msg_id = 'legacy-' || id WHERE kind = 'protocol';

-- A cancelled message becomes done without a session completing it. The
-- delivery CHECK is found by what it says, whatever an earlier migration
-- named it.
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND contype = 'c'
          AND pg_get_constraintdef(oid) LIKE '%session_seq IS NULL%'
    LOOP
        EXECUTE format('ALTER TABLE messages DROP CONSTRAINT %I', c);
    END LOOP;
END $$;

ALTER TABLE messages
    ADD CONSTRAINT messages_delivery_check CHECK ((state = 'queued') = (session_seq IS NULL)
        OR (state = 'done' AND session_seq IS NULL AND (recipient = 'operator' OR ack_state = 'cancelled'))),
    ADD CONSTRAINT messages_msg_id_check CHECK ((kind = 'protocol') = (msg_id IS NOT NULL)),
    ADD CONSTRAINT messages_protocol_check CHECK (kind = 'protocol' OR (task_id IS NULL AND protocol_type IS NULL)),
    ADD CONSTRAINT messages_ack_asked_check CHECK ((ack_required = 1) = (ack_state <> 'none')),
    ADD CONSTRAINT messages_ack_timeout_given_check CHECK (ack_required = 0 OR ack_timeout_sec > 0),
    ADD CONSTRAINT messages_acked_at_check CHECK ((ack_state = 'acked') = (acked_at IS NOT NULL)),
    ADD CONSTRAINT messages_overdue_check CHECK (ack_state <> 'overdue' OR ack_due_at IS NOT NULL);

CREATE UNIQUE INDEX messages_msg_id ON messages (msg_id) WHERE msg_id IS NOT NULL;
CREATE INDEX messages_task ON messages (task_id, id) WHERE task_id IS NOT NULL;
CREATE INDEX messages_ack_due ON messages (ack_due_at) WHERE ack_state = 'pending';
