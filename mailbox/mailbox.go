// Package mailbox is the swarm's state and its rules, as interfaces: mail
// and its delivery, agents, sessions, the event log and swarm-wide
// settings. Implementations live beside it (mailbox/sqlite; PostgreSQL
// for several hosts) and must pass the conformance suite in
// mailbox/mailboxtest. Nothing outside an implementation writes SQL.
//
// Delivery semantics: a message is queued until the recipient's next
// BuildingPrompt delivers it into session N. If session N completes, the
// message is done; if it is interrupted, crashes or fails, the message is
// queued again and counts as shown once more. Nothing is lost, and nothing
// is shown twice to a session that completed.
//
// Mail is posted through one service, Poster: it validates, stores and
// wakes. Store.InsertMessages is its storage step and nothing else's.
package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/team"
	"github.com/swarmhq/swarm/workflow"
)

// Errors every implementation returns (wrapped) for the same conditions.
var (
	// ErrNoSuchMessage means a message id (a reply_to, say) does not exist.
	ErrNoSuchMessage = errors.New("no such message")
	// ErrStateConflict means a compare-and-set transition found the subject
	// in a different state than expected: someone else moved it.
	ErrStateConflict = errors.New("state changed underneath")
	// ErrNoSuchAgent means the agent has no row yet.
	ErrNoSuchAgent = errors.New("no such agent")
	// ErrNoReport means the agent has made no report.
	ErrNoReport = errors.New("no report")
	// ErrNoSuchSession means the session does not exist (or is not running,
	// where a running one is needed).
	ErrNoSuchSession = errors.New("no such session")
	// ErrNoSuchItem means no workflow item has the id.
	ErrNoSuchItem = errors.New("no such work item")
	// ErrItemExists means a workflow item with the id exists already.
	ErrItemExists = errors.New("work item exists")
	// ErrNoSuchEscalation means the escalation id does not exist.
	ErrNoSuchEscalation = errors.New("no such escalation")
	// ErrDuplicateMsgID means a protocol message with the same msg_id is
	// stored already: another process built the same id at the same
	// millisecond. Build the message again (the id is bumped).
	ErrDuplicateMsgID = errors.New("msg_id already stored")
	// ErrAlreadyAnswered means a protocol answer (a task_result or a
	// review_verdict) was refused because its sender answered the same
	// request already; the error is an *AnsweredError naming the answer
	// that stands.
	ErrAlreadyAnswered = errors.New("request already answered")
	// ErrAckClosed means a message's ACK is not awaited: it was
	// acknowledged or cancelled already, asks for none, or was sent to
	// someone else.
	ErrAckClosed = errors.New("no ACK awaited")
	// ErrNoSuchTeam means the team has no launch row yet.
	ErrNoSuchTeam = errors.New("no such team launch")
	// ErrAgentExists means a spawn names an agent that is spawned and not
	// retired.
	ErrAgentExists = errors.New("agent already spawned")
	// ErrNoSuchCandidate means no merge queue candidate has the id.
	ErrNoSuchCandidate = errors.New("no such merge candidate")
	// ErrCandidateQueued means the agent's commit is in the merge queue
	// already (queued or testing); the error is a *QueuedError naming it.
	ErrCandidateQueued = errors.New("already in the merge queue")
	// ErrDatabaseGone means the database file this store opened was
	// deleted or replaced by another file: what it writes now would be
	// lost, and what others write goes elsewhere. The process must stop.
	ErrDatabaseGone = errors.New("the database file was deleted or replaced")
	// ErrDamaged means the store's data is damaged (a corrupt SQLite file,
	// PostgreSQL's data_corrupted or index_corrupted): every store wraps it
	// in the errors that say so, from Open or any later statement, so a
	// command can say what to do without knowing the backend.
	ErrDamaged = errors.New("the database is damaged")
)

// AnsweredError refuses a protocol answer whose sender answered the same
// request already (key: protocol.AnswerKey). Nothing was stored; Answer is
// the answer that stands. It unwraps to ErrAlreadyAnswered.
type AnsweredError struct {
	Key    string
	Answer message.Message
}

func (e *AnsweredError) Error() string {
	what := e.Key
	if req, sub, ok := strings.Cut(e.Key, "#"); ok {
		what = fmt.Sprintf("subtask %s of %s", sub, req)
	}
	return fmt.Sprintf("%s already answered %s as #%d (%s, %s): this answer was not stored, the first one stands and nothing more is needed",
		e.Answer.From, what, e.Answer.ID, e.Answer.MsgID, e.Answer.CreatedAt.UTC().Format(time.RFC3339))
}

func (e *AnsweredError) Unwrap() error { return ErrAlreadyAnswered }

// QueuedError refuses a second live candidate for one agent's commit:
// Candidate is the one in the queue. It unwraps to ErrCandidateQueued.
type QueuedError struct {
	Candidate merge.Candidate
}

func (e *QueuedError) Error() string {
	return fmt.Sprintf("%s's commit %s is in the merge queue already as #%d (%s)", e.Candidate.Agent,
		merge.Short(e.Candidate.Commit), e.Candidate.ID, e.Candidate.State)
}

func (e *QueuedError) Unwrap() error { return ErrCandidateQueued }

// CandidateFilter selects merge queue candidates.
type CandidateFilter struct {
	Agent  string        // only this agent's
	States []merge.State // only in these states; empty: all
	// Newest keeps only the newest Newest rows (still oldest first); 0: all.
	Newest int
}

// Store is an open swarm database. It is safe for concurrent use.
type Store interface {
	// InsertMessages stores drafts that Poster has validated, all or
	// none, in order. A draft with ReplyTo joins its parent's thread; a
	// missing parent is ErrNoSuchMessage. A protocol draft stores its
	// msg_id (ErrDuplicateMsgID when it is taken), task_id and ACK
	// request (ACK pending, with no deadline until the first delivery). An
	// ack (AckOf set) marks the message it acknowledges acked in the same
	// transaction: ErrNoSuchMessage when there is none, ErrAckClosed when
	// its ACK is not awaited from the ack's sender. A protocol answer
	// (AnswerKey set) is stored once per sender and key: a second one is
	// refused, in a race too, with an *AnsweredError whose Answer is the
	// stored one (package protocol: "One answer per request").
	InsertMessages(ctx context.Context, drafts []message.Draft) ([]message.Message, error)
	// Message returns one message.
	Message(ctx context.Context, id int64) (message.Message, error)
	// Thread returns every message of the thread message id belongs to,
	// oldest first (its first message, then the replies), or
	// ErrNoSuchMessage when there is no message id.
	Thread(ctx context.Context, id int64) ([]message.Message, error)
	// Queued returns the agent's queued mail in prompt order (urgent
	// first, then oldest), without delivering anything.
	Queued(ctx context.Context, agent string) ([]message.Message, error)
	// Inbox lists the mail of name (an agent or operator), oldest first.
	Inbox(ctx context.Context, name string, f Filter) ([]message.Message, error)
	// Pending counts the agent's undone mail.
	Pending(ctx context.Context, agent string) (Counts, error)
	// PendingAll counts the undone mail of every recipient (operator
	// included) at once, as Pending would for each: one read however
	// many agents there are. A name with no undone mail is absent.
	PendingAll(ctx context.Context) (map[string]Counts, error)
	// MessagesSince returns up to limit messages with id > after, oldest
	// first: what the change feed's reader has not seen yet.
	MessagesSince(ctx context.Context, after int64, limit int) ([]message.Message, error)
	// NewestMessageID is the highest message id, 0 when there is none.
	NewestMessageID(ctx context.Context) (int64, error)
	// Prune deletes done mail that became done before cutoff, always
	// keeping the newest message so ids are never reused, and lets the
	// backend reclaim space.
	Prune(ctx context.Context, cutoff time.Time) (int64, error)
	// ProtocolMessage returns the protocol message with this msg_id, or
	// ErrNoSuchMessage.
	ProtocolMessage(ctx context.Context, msgID string) (message.Message, error)
	// TaskMessages returns the protocol messages about a task (by the
	// envelope's task_id), oldest first.
	TaskMessages(ctx context.Context, taskID string) ([]message.Message, error)
	// ProtocolMessages returns protocol messages oldest first: the newest
	// limit of them, or all when limit is 0.
	ProtocolMessages(ctx context.Context, limit int) ([]message.Message, error)
	// PendingAcks returns the messages to agent whose ACK is awaited
	// (pending or overdue) and whose clock has started (they were
	// delivered into one of its sessions), oldest first.
	PendingAcks(ctx context.Context, agent string) ([]message.Message, error)
	// DueAcks returns up to limit messages whose ACK is pending with a
	// deadline at or before now, the earliest deadline first: what the
	// deadline sweeper must escalate.
	DueAcks(ctx context.Context, now time.Time, limit int) ([]message.Message, error)
	// NextAckDeadline returns the earliest deadline of a pending ACK; ok is
	// false when no ACK clock runs.
	NextAckDeadline(ctx context.Context) (due time.Time, ok bool, err error)
	// MarkAckOverdue moves the ACK of msgID from pending to overdue when its
	// deadline is at or before now, and reports whether it did (false: it
	// was acknowledged or moved meanwhile).
	MarkAckOverdue(ctx context.Context, msgID string, now time.Time) (bool, error)
	// MarkOperatorDone marks mail to operator done (the operator replied
	// to it or marked it read) and returns how many it changed. ids that
	// are not mail to operator, or are done already, are skipped.
	MarkOperatorDone(ctx context.Context, ids []int64) (int64, error)

	// RegisterAgent creates the agent's row in Stopped, or refreshes its
	// configured fields, keeping its state and counters.
	RegisterAgent(ctx context.Context, info AgentInfo) error
	// Agents returns every agent row, by name.
	Agents(ctx context.Context) ([]Agent, error)
	// Agent returns one agent's row, or ErrNoSuchAgent.
	Agent(ctx context.Context, name string) (Agent, error)
	// Heartbeat stamps the named agents that are not Stopped.
	Heartbeat(ctx context.Context, agents []string) error
	// SetActivity records what an agent is doing, for status displays.
	SetActivity(ctx context.Context, agent, activity string) error
	// SetNudges records how many nudges an idle agent has had.
	SetNudges(ctx context.Context, agent string, n int) error

	// Session returns one session, or ErrNoSuchSession.
	Session(ctx context.Context, agent string, seq int64) (Session, error)
	// LastSession returns the agent's newest session in state (any state
	// when state is empty), or ErrNoSuchSession.
	LastSession(ctx context.Context, agent string, state SessionState) (Session, error)
	// SessionCount counts every session of every agent.
	SessionCount(ctx context.Context) (int64, error)
	// AddSessionPgid records a process group the session started, so
	// recovery can kill it after a crash.
	AddSessionPgid(ctx context.Context, agent string, seq int64, pgid int) error

	// AddReport stores an agent's report and returns it with its id and
	// time. A task-level kind needs a task; a session report has none.
	AddReport(ctx context.Context, r Report) (Report, error)
	// LastReport returns the agent's newest report, or ErrNoReport.
	LastReport(ctx context.Context, agent string) (Report, error)
	// LastReports returns every agent's newest report, by agent, in one
	// read (status lists every agent; an agent with no report is absent).
	LastReports(ctx context.Context) (map[string]Report, error)
	// LastCapabilities returns, by agent, the capability vector stored
	// with each agent's newest session, in one read. An agent with no
	// session, or whose newest session stored none (recorded before
	// capabilities were), is absent.
	LastCapabilities(ctx context.Context) (map[string]mode.Vector, error)
	// UsageSince sums, by agent, the tokens and the known costs of the
	// sessions that ended at or after since (a running session has
	// reported none yet), and counts those of unknown cost, in one read.
	// An agent with no such session is absent.
	UsageSince(ctx context.Context, since time.Time) (map[string]Usage, error)

	// Events returns events oldest first.
	Events(ctx context.Context, f EventFilter) ([]fsm.Event, error)

	// Escalation returns one escalation, or ErrNoSuchEscalation.
	Escalation(ctx context.Context, id int64) (escalation.Escalation, error)
	// Escalations lists escalations as f selects them, in the desk's
	// order: the most severe first, then the newest first.
	Escalations(ctx context.Context, f EscalationFilter) ([]escalation.Escalation, error)
	// EscalationsByRef lists the escalations whose ref is exactly ref
	// (an item's "item:<id>", a session's "session:<agent>-<seq>"), of
	// every kind, newest first (by id); with openOnly, only the
	// unresolved ones (open and acked). An empty ref matches none. One
	// indexed read, for callers that would otherwise list every
	// escalation and compare refs.
	EscalationsByRef(ctx context.Context, ref string, openOnly bool) ([]escalation.Escalation, error)
	// SetNotified records what the notifier sent about an escalation. It
	// writes only that bookkeeping, never the escalation's state.
	SetNotified(ctx context.Context, id int64, n escalation.Notified) error

	// Item returns one workflow item, or ErrNoSuchItem.
	Item(ctx context.Context, id string) (workflow.Item, error)
	// Items lists the items of a workflow (every workflow's when name is
	// empty), first in, first out.
	Items(ctx context.Context, workflow string) ([]workflow.Item, error)

	// Candidate returns one merge queue candidate, or ErrNoSuchCandidate.
	Candidate(ctx context.Context, id int64) (merge.Candidate, error)
	// Candidates lists merge queue candidates as f selects them, first in,
	// first out (by id).
	Candidates(ctx context.Context, f CandidateFilter) ([]merge.Candidate, error)

	// Meta reads a swarm-wide setting, such as the recorded base branch.
	Meta(ctx context.Context, key string) (string, bool, error)
	// SetMeta writes a swarm-wide setting.
	SetMeta(ctx context.Context, key, value string) error

	// ClaimLeases makes c.Holder the one supervisor that runs c.Agents,
	// all or none. An agent whose lease another live holder keeps makes
	// the claim fail with *HeldError naming them; a lease whose holder is
	// gone (PostgreSQL: its advisory lock is free; otherwise its heartbeat
	// is older than c.TTL or c.Gone says so) is taken over. The holder's
	// own leases are renewed, at the same epoch; taking a lease over from
	// another holder bumps its epoch.
	//
	// Until the claim is released, this store fences every write it makes
	// about one of c.Agents with the claim (Fence: holder and epoch): an
	// agent Transition, ResetErrors, Deliver, StartSession, EndSession,
	// RecoverAgent, and RegisterAgent, Heartbeat, SetActivity, SetNudges and
	// AddSessionPgid. Once another holder took the lease over, such a write
	// changes nothing and fails with ErrLeaseLost.
	ClaimLeases(ctx context.Context, c LeaseClaim) (Leases, error)
	// AgentLeases lists every lease, by agent.
	AgentLeases(ctx context.Context) ([]Lease, error)

	// Team returns the team's launch row; ErrNoSuchTeam before its first
	// transition.
	Team(ctx context.Context, name string) (team.Launch, error)
	// SpawnedAgents returns every agent `swarm spawn` added, retired ones
	// too, oldest first.
	SpawnedAgents(ctx context.Context) ([]Spawned, error)
	// RetireSpawned marks a spawned agent retired now (ErrNoSuchAgent when
	// it has no spawned row); retiring it again keeps the first time.
	RetireSpawned(ctx context.Context, name string) error

	// Reserve stores reservations rs (each agent's of one glob, at now)
	// all or none. check sees the reservations live at now, read in the
	// same transaction as the write, so two racing reservations cannot
	// both pass it; an error from check refuses them, storing nothing. A
	// glob its agent holds already (not released, even if expired) is
	// refreshed: exclusive, reason and expiry replaced, and created_at
	// restarted at now when it had expired. It returns the stored rows, in
	// the order of rs.
	Reserve(ctx context.Context, now time.Time, rs []Reservation, check func(live []Reservation) error) ([]Reservation, error)
	// ReleaseReservations releases agent's held reservations of globs
	// (every one of the agent's when globs is empty) at now and returns
	// them, oldest first. A glob the agent does not hold is skipped.
	ReleaseReservations(ctx context.Context, agent string, globs []string, now time.Time) ([]Reservation, error)
	// Reservations lists reservations oldest first: those live at now (held
	// and not expired), or with all every stored one, released or expired.
	Reservations(ctx context.Context, now time.Time, all bool) ([]Reservation, error)
	// ExpireReservations releases the held reservations whose expiry is at
	// or before now (released_at is their expiry) and returns how many.
	ExpireReservations(ctx context.Context, now time.Time) (int64, error)

	// InTx runs fn in one transaction. fn must only use tx.
	InTx(ctx context.Context, fn func(tx Tx) error) error

	// Feed returns a change feed that reports commits made by other
	// processes (or hosts). every bounds how long a change may go
	// unnoticed where the backend has to poll.
	Feed(ctx context.Context, every time.Duration) (Feed, error)
	// Unavailable reports whether err, returned by this store, means the
	// database could not be reached for a moment (a server restart, a
	// network cut): nothing was committed, and the same call may succeed
	// if retried later.
	Unavailable(err error) bool
	// Check verifies the database's integrity and returns a one-line
	// verdict ("ok" when healthy).
	Check(ctx context.Context) (string, error)
	// Location names the database for messages (a path or a URL without
	// credentials).
	Location() string
	Close() error
}

// Tx is a transaction over the lifecycle operations that must not be
// separated by a crash: ending a session, settling its mail and moving the
// agent go through one Tx. It implements fsm.Recorder.
type Tx interface {
	// Agent returns one agent's row, or ErrNoSuchAgent.
	Agent(name string) (Agent, error)
	// Transition applies one compare-and-set change and records its
	// event. The first event of a subject has no from state. Agent
	// subjects move the agents row. Escalation subjects (the id in
	// decimal) move the escalations row, stamping acked_at or resolved_at,
	// and their events carry the escalation's agent; an escalation's first
	// change (From "") finds the row InsertEscalation just stored in To.
	// Item subjects (the item's id) move the workflow_items row the same
	// way, and their events carry c.By as their agent.
	// Team subjects (the team's name) move the teams row; a team's first
	// change (From "") creates it, and fails with ErrStateConflict when
	// it exists. Merge subjects (the candidate's id in decimal) move the
	// merge_candidates row like items (the first change finds the row
	// EnqueueCandidate stored), and their events carry the candidate's
	// agent; leaving testing clears the claim.
	Transition(c fsm.Change) (fsm.Event, error)
	// ResetErrors starts an agent's error counts over.
	ResetErrors(agent string) error
	// Deliver moves the agent's queued messages ids (every queued message
	// when ids is nil) into session seq and returns the ones it moved, in
	// prompt order. Messages no longer queued are skipped. A message whose
	// ACK is pending and has no deadline gets one: now plus its ACK
	// timeout. A redelivery keeps the deadline it has.
	Deliver(agent string, seq int64, ids []int64) ([]message.Message, error)
	// StartSession records a session as running.
	StartSession(s SessionStart) error
	// EndSession closes a running session and settles its mail: done when
	// it completed, queued again otherwise. It also updates the agent's
	// token and error counters.
	EndSession(e SessionEnd) error
	// RecoverAgent fixes what a crash left for one agent: sessions left
	// running become crashed, and every message still delivered is queued
	// again.
	RecoverAgent(agent string) (Recovered, error)

	// Escalation returns one escalation, or ErrNoSuchEscalation.
	Escalation(id int64) (escalation.Escalation, error)
	// UnresolvedTwin returns the unresolved (open or acked) escalation with
	// this dedupe key, if there is one.
	UnresolvedTwin(dedupeKey string) (escalation.Escalation, bool, error)
	// InsertEscalation stores a validated, normalized draft as an open
	// escalation with count 1. Its first transition (from nothing to open,
	// through Transition) is the caller's to record.
	InsertEscalation(d escalation.Draft) (escalation.Escalation, error)
	// CountEscalation adds one to an unresolved escalation's count and
	// returns the row.
	CountEscalation(id int64) (escalation.Escalation, error)
	// SetDecision writes the decision and the note of an escalation that
	// Transition has just resolved, or only the note for an ack (decision
	// empty). A decision on an unresolved escalation is refused.
	SetDecision(id int64, d escalation.Decision, note string) error
	// MarkShown records that session seq's prompt carried the decisions of
	// escalations ids.
	MarkShown(ids []int64, seq int64) error

	// InsertItem stores a new workflow item in its first state
	// (ErrItemExists when the id is taken). Its first transition (from
	// nothing, through Transition) is the caller's to record.
	InsertItem(it workflow.Item) error
	// Item returns one workflow item, or ErrNoSuchItem.
	Item(id string) (workflow.Item, error)
	// UpdateItem writes an item's counters and bookkeeping (everything
	// but its state, which only Transition moves) and stamps updated_at.
	UpdateItem(it workflow.Item) error

	// RequeueAck queues the protocol message msgID again for its
	// recipient, with its ACK pending and no deadline (the next delivery
	// starts a fresh one): the operator resumed its ack_timeout.
	// ErrAckClosed when its ACK is not awaited.
	RequeueAck(msgID string) (message.Message, error)
	// CancelAck ends the protocol message msgID: delivery done, ACK
	// cancelled; the operator aborted its ack_timeout. ErrAckClosed when its
	// ACK is not awaited.
	CancelAck(msgID string) (message.Message, error)

	// Team returns the team's launch row, or ErrNoSuchTeam.
	Team(name string) (team.Launch, error)
	// SaveTeam writes a launch row's pings, breaches, relaunches and
	// escalation (never its state: Transition moves that) and stamps
	// updated_at; ErrNoSuchTeam when the row does not exist.
	SaveTeam(l team.Launch) error
	// EnqueueCandidate stores a new merge queue candidate in queued and
	// returns it with its id and times. A live candidate (queued or
	// testing) of the same agent and commit refuses it with a *QueuedError.
	// Its first transition (from nothing, through Transition) is the
	// caller's to record.
	EnqueueCandidate(c merge.Candidate) (merge.Candidate, error)
	// Candidate returns one candidate, or ErrNoSuchCandidate.
	Candidate(id int64) (merge.Candidate, error)
	// QueuedCandidates returns up to limit queued candidates, first in,
	// first out: the next batch to claim (each through Transition, whose
	// compare-and-set makes a claim another host made first fail with
	// ErrStateConflict).
	QueuedCandidates(limit int) ([]merge.Candidate, error)
	// SaveCandidate writes a candidate's bookkeeping (everything but its
	// state, which only Transition moves, and its identity) and stamps
	// updated_at; ErrNoSuchCandidate when there is no row.
	SaveCandidate(c merge.Candidate) error

	// SpawnedAgents is Store.SpawnedAgents inside the transaction.
	SpawnedAgents() ([]Spawned, error)
	// AddSpawned stores a spawned agent, replacing a retired row of the
	// same name; ErrAgentExists when one that is not retired exists.
	AddSpawned(s Spawned) error
}

// DiskFullError is a write the database refused because the file system
// holding it has no space left. Nothing of the write was stored; the
// caller's context (wrapping it) says what that was.
type DiskFullError struct {
	Path string // the database file
	Free int64  // bytes free on its file system when the write failed; -1 unknown
	Err  error  // what the database said
}

func (e *DiskFullError) Error() string {
	free := "no space"
	if e.Free > 0 {
		free = fmt.Sprintf("only %d KiB", e.Free/1024)
	}
	return fmt.Sprintf("the disk is full: the file system holding %s has %s left, so nothing of this was stored (%v); free space there (or move the repository to a larger disk), then try again",
		e.Path, free, e.Err)
}

func (e *DiskFullError) Unwrap() error { return e.Err }
