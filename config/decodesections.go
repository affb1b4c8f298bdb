package config

import (
	"regexp"
	"strconv"
	"strings"
)

// envName is what [env] pass accepts: a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (b *builder) env(r rawEnv) {
	seen := make(map[string]int, len(r.Pass))
	for i, name := range r.Pass {
		key := "env.pass[" + strconv.Itoa(i) + "]"
		if before, _, hasValue := strings.Cut(name, "="); hasValue {
			// Never echo what follows "=": it is likely the secret itself.
			b.errorf(key, "[env] pass lists %q with a value; list the name only (the value comes from your environment)", before+"=...")
			continue
		}
		switch {
		case name == "":
			b.errorf(key, "[env] pass lists an empty name; remove it")
			continue
		case strings.ContainsAny(name, "*?["):
			b.errorf(key, "[env] pass lists the pattern %q; list each variable by its full name", name)
			continue
		case !envName.MatchString(name):
			b.errorf(key, "[env] pass lists %q, which is not a variable name: use letters, digits and '_', not starting with a digit", name)
			continue
		}
		if first, dup := seen[name]; dup {
			b.errorf(key, "[env] pass lists %q twice (first on line %d); remove one", name, b.line("env.pass["+strconv.Itoa(first)+"]"))
			continue
		}
		seen[name] = i
		b.cfg.Env.Pass = append(b.cfg.Env.Pass, name)
	}
}

func (b *builder) prompt(r rawPrompt) {
	p := &b.cfg.Prompt
	if r.MessageCap != nil {
		n, err := parseSize(r.MessageCap)
		if err != nil {
			b.errorf("prompt.message_cap", "%v", err)
		} else {
			p.MessageCap = n
		}
	}
	if r.TaskLimit != nil {
		if *r.TaskLimit < 0 {
			b.errorf("prompt.task_limit", "task_limit must not be negative")
		} else {
			p.TaskLimit = *r.TaskLimit
		}
	}
	if r.IncludeEpics != nil {
		p.IncludeEpics = *r.IncludeEpics
	}
	if r.GitTimeout != nil {
		p.GitTimeout = b.duration("prompt.git_timeout", *r.GitTimeout, false)
	}
	if r.BDTimeout != nil {
		p.BDTimeout = b.duration("prompt.bd_timeout", *r.BDTimeout, false)
	}
}

func (b *builder) liveness(r rawLiveness) {
	l := &b.cfg.Liveness
	if r.Heartbeat != nil {
		l.Heartbeat = b.duration("liveness.heartbeat", *r.Heartbeat, false)
	}
	if r.NudgeAfter != nil {
		l.NudgeAfter = b.duration("liveness.nudge_after", *r.NudgeAfter, true)
	}
	if r.NudgeEvery != nil {
		l.NudgeEvery = b.duration("liveness.nudge_every", *r.NudgeEvery, false)
	}
	if r.MaxNudges != nil {
		if *r.MaxNudges < 0 {
			b.errorf("liveness.max_nudges", "max_nudges must not be negative")
		} else {
			l.MaxNudges = *r.MaxNudges
		}
	}
	if r.TaskPoll != nil {
		l.TaskPoll = b.duration("liveness.task_poll", *r.TaskPoll, false)
	}
	if r.StallAfter != nil {
		l.StallAfter = b.duration("liveness.stall_after", *r.StallAfter, true)
	}
}

func (b *builder) errorsSection(r rawErrors) {
	e := &b.cfg.Errors
	positive := func(key string, v *int, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			b.errorf(key, "must be at least 1, got %d", *v)
			return
		}
		*dst = *v
	}
	positive("errors.max_consecutive", r.MaxConsecutive, &e.MaxConsecutive)
	positive("errors.max_total", r.MaxTotal, &e.MaxTotal)
	if r.BackoffMin != nil {
		e.BackoffMin = b.duration("errors.backoff_min", *r.BackoffMin, false)
	}
	if r.BackoffMax != nil {
		e.BackoffMax = b.duration("errors.backoff_max", *r.BackoffMax, false)
	}
	if e.BackoffMax < e.BackoffMin {
		b.errorf("errors.backoff_max", "backoff_max (%s) is below backoff_min (%s)", e.BackoffMax, e.BackoffMin)
	}
}

// merge reads [merge].
func (b *builder) merge(r rawMerge) {
	m := &b.cfg.Merge
	if r.CI != nil {
		m.CI = strings.TrimSpace(*r.CI)
	}
	if r.CITimeout != nil {
		m.CITimeout = b.duration("merge.ci_timeout", *r.CITimeout, false)
	}
	if r.Batch != nil {
		if *r.Batch < 1 || *r.Batch > 64 {
			b.errorf("merge.batch", "[merge] batch = %d: test between 1 and 64 candidates at once", *r.Batch)
		} else {
			m.Batch = *r.Batch
		}
	}
	if r.AfterQA != nil {
		m.AfterQA = *r.AfterQA
	}
}
