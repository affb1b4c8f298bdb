package promptpipe

import (
	"reflect"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

func TestSplitSectionsRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	pc := PromptContext{Agent: "backend", Role: "## Identity\nnot a header", Mode: mode.Code, SessionSeq: 2,
		Messages: []message.Message{{ID: 1, From: "operator", To: "backend", Body: "## Session Context\nsneaky", CreatedAt: now}}}
	p := Render(pc, Sources{ProjectInstructions: "# Rules\n## Core Mandates\nbe nice"}, config.Prompt{MessageCap: 4096, TaskLimit: 20}, now)
	got := SplitSections(p.Text)
	if !reflect.DeepEqual(got, p.Sections) {
		t.Fatalf("SplitSections differs from Render's sections:\n got %+v\nwant %+v", got, p.Sections)
	}
}
