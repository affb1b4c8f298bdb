-- Workflows (DESIGN §9.3): work items of the dev-review and dev-qa
-- workflows. The translation of sqlite/0008.
--
-- An item moves through its kind's fsm table in package workflow; each
-- move is an event (subject_kind 'item', subject the item's id, agent who
-- triggered it: an agent, 'swarm' or 'operator').

CREATE TABLE workflow_items (
    id            TEXT PRIMARY KEY CONSTRAINT workflow_items_id_check CHECK (length(id) BETWEEN 1 AND 64),
    workflow      TEXT NOT NULL,
    kind          TEXT NOT NULL CONSTRAINT workflow_items_kind_check CHECK (kind IN ('dev-review', 'dev-qa')),
    title         TEXT NOT NULL CONSTRAINT workflow_items_title_check CHECK (length(title) > 0),
    criteria      TEXT NOT NULL DEFAULT '[]',
    risk          TEXT NOT NULL DEFAULT 'medium' CONSTRAINT workflow_items_risk_check CHECK (risk IN ('low', 'medium', 'high')),
    complex       BIGINT NOT NULL DEFAULT 0 CONSTRAINT workflow_items_complex_check CHECK (complex IN (0, 1)),
    state         TEXT NOT NULL CONSTRAINT workflow_items_state_check CHECK (state IN (
                      'dispatched', 'in_progress', 'in_review', 'approved', 'merged', 'rejected', 'locked', 'aborted',
                      'START', 'INITIALIZER', 'DEV_READY', 'DEV', 'QA_READY', 'QA', 'QA_PASSED', 'DEV_FEEDBACK')),
    reject_count  BIGINT NOT NULL DEFAULT 0 CONSTRAINT workflow_items_reject_count_check CHECK (reject_count >= 0),
    ci_failures   BIGINT NOT NULL DEFAULT 0 CONSTRAINT workflow_items_ci_failures_check CHECK (ci_failures >= 0),
    agent         TEXT NOT NULL DEFAULT '',
    dispatch_msg  TEXT NOT NULL DEFAULT '',
    request_msg   TEXT NOT NULL DEFAULT '',
    result_msg    TEXT NOT NULL DEFAULT '',
    inputs        TEXT NOT NULL DEFAULT '[]',
    review_commit TEXT NOT NULL DEFAULT '',
    stage_at      BIGINT,
    notified      TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

CREATE INDEX workflow_items_workflow ON workflow_items (workflow, created_at, id);

CREATE TRIGGER workflow_items_notify AFTER INSERT OR UPDATE OR DELETE ON workflow_items
    FOR EACH STATEMENT EXECUTE FUNCTION swarm_notify_change();
