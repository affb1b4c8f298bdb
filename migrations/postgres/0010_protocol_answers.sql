-- One answer per request (DESIGN §9.2, package protocol: "One answer per
-- request"). The translation of sqlite/0010.
--
--   answer_key   on a task_result or a review_verdict, what it answers:
--                the request's msg_id, and "#<subtask_id>" for a result
--                about one subtask. NULL on every other message, and on
--                answers stored before this migration (they may repeat).
--
-- The unique index is the rule itself: a sender answers a request once,
-- and of two processes racing with the same answer only one stores it.
ALTER TABLE messages ADD COLUMN answer_key TEXT;
CREATE UNIQUE INDEX messages_answer ON messages (sender, answer_key) WHERE answer_key IS NOT NULL;
