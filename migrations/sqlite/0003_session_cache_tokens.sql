-- Prompt-cache tokens of a session, apart from tokens_in (input neither
-- written to nor read from a cache) and tokens_out. A budget counts
-- tokens_in + tokens_out + cache_write, not cache_read; agents.tokens counts
-- the same from here on.

ALTER TABLE sessions ADD COLUMN cache_write INTEGER NOT NULL DEFAULT 0 CHECK (cache_write >= 0);
ALTER TABLE sessions ADD COLUMN cache_read INTEGER NOT NULL DEFAULT 0 CHECK (cache_read >= 0);
