-- swarm thread reads a message's whole thread: the replies by their
-- thread_id (a thread's first message has none and is read by its id).
CREATE INDEX messages_thread ON messages (thread_id, id) WHERE thread_id IS NOT NULL;
