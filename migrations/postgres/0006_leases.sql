-- Agent leases (DESIGN §12): which supervisor runs each agent when several
-- share one database. One row per agent held; a supervisor renews its rows
-- with heartbeats and deletes them when it stops. Times are Unix
-- nanoseconds, as everywhere else. The row says who holds the lease; the
-- holder's session-level advisory lock on the agent says whether it is
-- still alive: PostgreSQL drops it with the holder's connection.
--
--   holder_host, holder_pid   the supervisor: its hostname and pid there
--   acquired_at               when it took the lease
--   heartbeat_at              its last renewal
CREATE TABLE leases (
    agent        TEXT PRIMARY KEY,
    holder_host  TEXT NOT NULL CONSTRAINT leases_holder_host_check CHECK (holder_host <> ''),
    holder_pid   BIGINT NOT NULL CONSTRAINT leases_holder_pid_check CHECK (holder_pid > 0),
    acquired_at  BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

CREATE TRIGGER leases_notify AFTER INSERT OR UPDATE OR DELETE ON leases
    FOR EACH STATEMENT EXECUTE FUNCTION swarm_notify_change();
