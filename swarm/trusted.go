package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/mailbox"
)

// The settings of swarm.toml that run a program or send data out with the
// operator's full environment (DESIGN §13.3). Without a sandbox an agent
// can write the root swarm.toml; the guard reports that, and `swarm up`
// also refuses to run a changed one until the operator confirms it. The
// values the last supervisor ran with are kept in the store's meta.

// MetaTrustedSettings is the meta key that holds the trusted settings the
// last supervisor ran with (a JSON object, key to value).
const MetaTrustedSettings = "trusted_settings"

// SettingChange is one trusted setting that differs from the last run;
// Old or New is "" when the setting was or is unset.
type SettingChange struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
}

// String says the change as old → new.
func (c SettingChange) String() string {
	show := func(v string) string {
		if v == "" {
			return "(unset)"
		}
		return v
	}
	return fmt.Sprintf("%s: %s → %s", c.Key, show(c.Old), show(c.New))
}

// TrustedSettings lists cfg's settings that run a program or send data
// out: [notify] command and webhook, each [engine.NAME]'s command, args
// and base_url, [merge] ci and each [[workflow]]'s ci (a landing brings
// an agent's swarm.toml into the checkout: its CI must not run unseen).
// Unset ones are absent.
func TrustedSettings(cfg *config.Config) map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("notify.command", argv(cfg.Notify.Command))
	set("notify.webhook", cfg.Notify.Webhook)
	set("merge.ci", cfg.Merge.CI)
	for _, w := range cfg.Workflows {
		set("workflow."+w.Name+".ci", argv(w.CI))
	}
	for name, e := range cfg.Engines {
		at := "engine." + name + "."
		set(at+"command", argv(e.Command))
		set(at+"args", argv(e.Args))
		set(at+"base_url", e.BaseURL)
	}
	return out
}

// argv shows a command line with each word quoted.
func argv(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	if len(q) == 0 {
		return ""
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// ChangedSettings lists cfg's trusted settings that are new or differ from
// those the last supervisor ran with, in key order. Nothing is a change when no
// supervisor recorded any yet: the first run trusts the file it starts
// with.
func ChangedSettings(ctx context.Context, st mailbox.Store, cfg *config.Config) ([]SettingChange, error) {
	v, ok, err := st.Meta(ctx, MetaTrustedSettings)
	if err != nil {
		return nil, fmt.Errorf("read the settings the last supervisor ran with: %w", err)
	}
	if !ok {
		return nil, nil
	}
	last := map[string]string{}
	if err := json.Unmarshal([]byte(v), &last); err != nil {
		// Unreadable means unknown: everything set is shown as new.
		last = map[string]string{}
	}
	now := TrustedSettings(cfg)
	keys := slices.Sorted(maps.Keys(now))
	for k := range last {
		if _, ok := now[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []SettingChange
	for _, k := range keys {
		// A setting removed runs nothing: only what would run is asked.
		if last[k] != now[k] && now[k] != "" {
			out = append(out, SettingChange{Key: k, Old: last[k], New: now[k]})
		}
	}
	return out, nil
}

// RecordSettings stores cfg's trusted settings as those the supervisor
// runs with: the next `swarm up` compares with them.
func RecordSettings(ctx context.Context, st mailbox.Store, cfg *config.Config) error {
	b, err := json.Marshal(TrustedSettings(cfg))
	if err != nil {
		return fmt.Errorf("record the trusted settings: %w", err)
	}
	if err := st.SetMeta(ctx, MetaTrustedSettings, string(b)); err != nil {
		return fmt.Errorf("record the trusted settings: %w", err)
	}
	return nil
}
