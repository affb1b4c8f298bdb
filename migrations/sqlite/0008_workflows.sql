-- Workflows (DESIGN §9.3): work items of the dev-review and dev-qa
-- workflows. An item moves through its kind's fsm table in package
-- workflow; each move is an event (subject_kind 'item', subject the item's
-- id, agent who triggered it: an agent, 'swarm' or 'operator').

CREATE TABLE workflow_items (
    id            TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    workflow      TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('dev-review', 'dev-qa')),
    title         TEXT NOT NULL CHECK (length(title) > 0),
    criteria      TEXT NOT NULL DEFAULT '[]', -- a JSON array of strings
    risk          TEXT NOT NULL DEFAULT 'medium' CHECK (risk IN ('low', 'medium', 'high')),
    complex       INTEGER NOT NULL DEFAULT 0 CHECK (complex IN (0, 1)),
    state         TEXT NOT NULL CHECK (state IN (
                      'dispatched', 'in_progress', 'in_review', 'approved', 'merged', 'rejected', 'locked', 'aborted',
                      'START', 'INITIALIZER', 'DEV_READY', 'DEV', 'QA_READY', 'QA', 'QA_PASSED', 'DEV_FEEDBACK')),
    reject_count  INTEGER NOT NULL DEFAULT 0 CHECK (reject_count >= 0),
    ci_failures   INTEGER NOT NULL DEFAULT 0 CHECK (ci_failures >= 0),
    agent         TEXT NOT NULL DEFAULT '',   -- whose turn it is
    dispatch_msg  TEXT NOT NULL DEFAULT '',   -- msg_id of the current task_dispatch
    request_msg   TEXT NOT NULL DEFAULT '',   -- msg_id of the current review_request
    result_msg    TEXT NOT NULL DEFAULT '',   -- msg_id of the task_result being handled
    inputs        TEXT NOT NULL DEFAULT '[]', -- JSON: what the next round gets verbatim
    review_commit TEXT NOT NULL DEFAULT '',   -- the commit the review was computed at
    stage_at      INTEGER,                    -- when the current stage's session began
    notified      TEXT NOT NULL DEFAULT '',   -- the state its agent was last told of
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE INDEX workflow_items_workflow ON workflow_items (workflow, created_at, id);
