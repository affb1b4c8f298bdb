-- A session's cost in US dollars: what the CLI reported (Claude Code's
-- total_cost_usd), else its tokens priced by swarm.toml's [prices] table.
-- NULL means unknown (no price for an API engine's model, or a session
-- recorded before costs were): never counted as 0. SQLite has the same
-- number: sqlite/0012.

ALTER TABLE sessions ADD COLUMN cost_usd DOUBLE PRECISION CONSTRAINT sessions_cost_usd_check CHECK (cost_usd IS NULL OR cost_usd >= 0);
