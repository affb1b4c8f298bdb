package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/workflow"
)

// Workflow is one [[workflow]]: a built-in kind with its roles bound to
// agents (DESIGN §9.3).
type Workflow struct {
	Name        string
	Kind        workflow.Kind
	Dev         string
	Reviewer    string // dev-review
	QA          string // dev-qa
	Initializer string // dev-qa, optional
	// MaxRejects locks a dev-review item at its nth rejection.
	MaxRejects int
	// CI runs in dev's worktree after its task_result, before the review;
	// empty: no CI. CIRetries repair dispatches are allowed, the next
	// failure escalates.
	CI        []string
	CIRetries int
	// Merge is "approval" when every approved item needs the operator's
	// yes before its merge (risk high always does); "" otherwise.
	Merge string
	// Timeout bounds a dev-qa stage; ComplexTimeout one of an item
	// started with --complex.
	Timeout        time.Duration
	ComplexTimeout time.Duration
	// ResultTimeout bounds a dev-review round: dev's task_result is due
	// this long after its ACK of the dispatch, or a stage_timeout
	// escalation opens. Whole minutes: the dispatch carries it as its
	// timeout_minutes.
	ResultTimeout time.Duration
}

// MergeApproval is merge = "approval".
const MergeApproval = "approval"

// The defaults of a [[workflow]].
const (
	DefaultMaxRejects     = 3
	DefaultCIRetries      = 2
	DefaultStageTimeout   = 10 * time.Minute
	DefaultComplexTimeout = 30 * time.Minute
	DefaultResultTimeout  = 2 * time.Hour
)

// Role returns the agent bound to role ("dev", "reviewer", "qa",
// "initializer"), "" when none is.
func (w Workflow) Role(role string) string {
	switch role {
	case "dev":
		return w.Dev
	case "reviewer":
		return w.Reviewer
	case "qa":
		return w.QA
	case "initializer":
		return w.Initializer
	}
	return ""
}

// RoleOf returns the role agent plays in the workflow, "" when none.
func (w Workflow) RoleOf(agent string) string {
	for _, r := range []string{"dev", "reviewer", "qa", "initializer"} {
		if agent != "" && w.Role(r) == agent {
			return r
		}
	}
	return ""
}

// Members lists the agents the workflow binds.
func (w Workflow) Members() []string {
	var out []string
	for _, r := range []string{"initializer", "dev", "reviewer", "qa"} {
		if a := w.Role(r); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// StageTimeout is the timeout of a stage of an item (complex or not).
func (w Workflow) StageTimeout(complex bool) time.Duration {
	if complex {
		return w.ComplexTimeout
	}
	return w.Timeout
}

// Workflow returns the [[workflow]] named name.
func (c *Config) Workflow(name string) (Workflow, bool) {
	for _, w := range c.Workflows {
		if w.Name == name {
			return w, true
		}
	}
	return Workflow{}, false
}

// WorkflowNames lists the configured workflows.
func (c *Config) WorkflowNames() []string {
	out := make([]string, len(c.Workflows))
	for i, w := range c.Workflows {
		out[i] = w.Name
	}
	return out
}

type rawWorkflow struct {
	Name           string   `toml:"name"`
	Kind           string   `toml:"kind"`
	Dev            string   `toml:"dev"`
	Reviewer       string   `toml:"reviewer"`
	QA             string   `toml:"qa"`
	Initializer    string   `toml:"initializer"`
	MaxRejects     *int     `toml:"max_rejects"`
	CI             []string `toml:"ci"`
	CIRetries      *int     `toml:"ci_retries"`
	Merge          *string  `toml:"merge"`
	Timeout        *string  `toml:"timeout"`
	ComplexTimeout *string  `toml:"complex_timeout"`
	ResultTimeout  *string  `toml:"result_timeout"`
}

// workflows reads the [[workflow]] tables; the agents are read already.
func (b *builder) workflows(raws []rawWorkflow) {
	seen := map[string]int{}
	for i, rw := range raws {
		at := "workflow[" + strconv.Itoa(i) + "]"
		w := Workflow{Name: rw.Name, Kind: workflow.Kind(rw.Kind), Dev: rw.Dev, Reviewer: rw.Reviewer, QA: rw.QA, Initializer: rw.Initializer,
			MaxRejects: DefaultMaxRejects, CI: rw.CI, CIRetries: DefaultCIRetries, Timeout: DefaultStageTimeout, ComplexTimeout: DefaultComplexTimeout,
			ResultTimeout: DefaultResultTimeout}
		switch {
		case rw.Name == "":
			b.errorf(at, "workflow has no name: add name = \"review\" (the name 'swarm workflow start' takes)")
		case !message.ValidName(rw.Name):
			b.errorf(at+".name", "bad workflow name %q: use lower-case letters, digits and '-', starting with a letter", rw.Name)
		default:
			if first, dup := seen[rw.Name]; dup {
				b.errorf(at+".name", "duplicate workflow name %q (first defined on line %d); rename or remove one", rw.Name, b.line("workflow["+strconv.Itoa(first)+"].name"))
			}
			seen[rw.Name] = i
		}
		if !w.Kind.Valid() {
			names := []string{string(workflow.DevReview), string(workflow.DevQA)}
			msg := fmt.Sprintf("unknown workflow kind %q (valid: %s)", rw.Kind, strings.Join(names, ", "))
			if s := Suggest(rw.Kind, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			key := at + ".kind"
			if rw.Kind == "" {
				key = at
			}
			b.errorf(key, "%s", msg)
			b.cfg.Workflows = append(b.cfg.Workflows, w)
			continue
		}
		required, optional := w.Kind.Roles()
		bound := map[string]string{} // agent -> role
		for _, role := range []string{"dev", "reviewer", "qa", "initializer"} {
			agent := w.Role(role)
			key := at + "." + role
			allowed := slices.Contains(required, role) || slices.Contains(optional, role)
			switch {
			case agent == "" && slices.Contains(required, role):
				b.errorf(at, "workflow %q (%s) needs %s = \"<agent>\"", rw.Name, w.Kind, role)
			case agent == "":
			case !allowed:
				b.errorf(key, "a %s workflow has no %s role (its roles: %s)", w.Kind, role, strings.Join(append(required, optional...), ", "))
			case !b.hasAgent(agent):
				msg := fmt.Sprintf("%s = %q is not a configured agent", role, agent)
				if s := Suggest(agent, b.cfg.AgentNames()); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				b.errorf(key, "%s (agents: %s)", msg, strings.Join(b.cfg.AgentNames(), ", "))
			default:
				if other, dup := bound[agent]; dup {
					b.errorf(key, "%s is bound to two roles of workflow %q (%s and %s); give each role its own agent", agent, rw.Name, other, role)
				}
				bound[agent] = role
			}
		}
		if rw.MaxRejects != nil {
			if *rw.MaxRejects < 1 {
				b.errorf(at+".max_rejects", "max_rejects must be at least 1, got %d", *rw.MaxRejects)
			}
			w.MaxRejects = *rw.MaxRejects
		}
		if rw.CI != nil && (len(rw.CI) == 0 || rw.CI[0] == "") {
			b.errorf(at+".ci", "ci is a command line as a list, such as [\"make\", \"test\"]; remove the key for no CI")
		}
		if rw.CIRetries != nil {
			if *rw.CIRetries < 0 {
				b.errorf(at+".ci_retries", "ci_retries must not be negative, got %d", *rw.CIRetries)
			}
			w.CIRetries = *rw.CIRetries
		}
		if rw.Merge != nil {
			switch *rw.Merge {
			case "", MergeApproval:
				w.Merge = *rw.Merge
			default:
				b.errorf(at+".merge", "merge = %q: use \"approval\" (every merge waits for the operator's yes) or remove the key", *rw.Merge)
			}
		}
		if w.Kind != workflow.DevReview {
			for key, set := range map[string]bool{"max_rejects": rw.MaxRejects != nil, "ci": rw.CI != nil, "ci_retries": rw.CIRetries != nil, "merge": rw.Merge != nil,
				"result_timeout": rw.ResultTimeout != nil} {
				if set {
					b.errorf(at+"."+key, "%s belongs to dev-review workflows; a %s workflow has no review", key, w.Kind)
				}
			}
		}
		if rw.Timeout != nil {
			w.Timeout = b.duration(at+".timeout", *rw.Timeout, false)
		}
		if rw.ComplexTimeout != nil {
			w.ComplexTimeout = b.duration(at+".complex_timeout", *rw.ComplexTimeout, false)
		}
		if rw.ResultTimeout != nil {
			key := at + ".result_timeout"
			switch d := b.duration(key, *rw.ResultTimeout, false); {
			case d == 0: // reported
			case d%time.Minute != 0:
				b.errorf(key, "result_timeout = %q: use whole minutes, such as \"90m\" or \"2h\" (a dispatch carries it as timeout_minutes)", *rw.ResultTimeout)
			default:
				w.ResultTimeout = d
			}
		}
		b.cfg.Workflows = append(b.cfg.Workflows, w)
	}
}

func (b *builder) hasAgent(name string) bool {
	_, ok := b.cfg.Agent(name)
	return ok
}
