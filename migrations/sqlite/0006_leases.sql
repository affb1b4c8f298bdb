-- Agent leases (DESIGN §12): which supervisor runs each agent when several
-- share one database. One row per agent held; a supervisor renews its rows
-- with heartbeats and deletes them when it stops. Times are Unix
-- nanoseconds, as everywhere else.
--
--   holder_host, holder_pid   the supervisor: its hostname and pid there
--   acquired_at               when it took the lease
--   heartbeat_at              its last renewal
CREATE TABLE leases (
    agent        TEXT PRIMARY KEY,
    holder_host  TEXT NOT NULL CHECK (holder_host <> ''),
    holder_pid   INTEGER NOT NULL CHECK (holder_pid > 0),
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
