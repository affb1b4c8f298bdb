-- swarm thread reads a message's whole thread. The translation of
-- sqlite/0010.
CREATE INDEX messages_thread ON messages (thread_id, id) WHERE thread_id IS NOT NULL;
