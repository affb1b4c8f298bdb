-- Fenced leases (DESIGN §12). PostgreSQL has the same number:
-- postgres/0011.
--
-- epoch is the lease's generation: a claim that changes hands bumps it. A supervisor's
-- writes about an agent (its state, sessions, mail delivery, heartbeat)
-- carry the holder and epoch it claimed with, and the store refuses them
-- once the row names another holder or a newer epoch, so a supervisor that
-- lost its lease cannot overwrite the new owner's rows.
ALTER TABLE leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1;
