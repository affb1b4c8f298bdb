-- Escalations by ref. The translation of the SQLite migration of the same number.
CREATE INDEX escalations_ref ON escalations (ref, id) WHERE ref IS NOT NULL;
