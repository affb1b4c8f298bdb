-- Escalations by ref (Store.EscalationsByRef): the workflow engine reads an
-- item's round by its ref on every look, as one indexed read.
CREATE INDEX escalations_ref ON escalations (ref, id) WHERE ref IS NOT NULL;
