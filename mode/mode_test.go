package mode

import (
	"slices"
	"testing"
)

func TestModeTools(t *testing.T) {
	tests := []struct {
		mode  Mode
		beads bool
		want  []string
	}{
		{Code, true, AllTools},
		{Code, false, []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate}},
		{Delegate, true, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, BDClaim, BDClose, BDShow}},
		{Delegate, false, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate}},
		{Review, true, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate}},
	}
	for _, tt := range tests {
		if got := tt.mode.Tools(tt.beads); !slices.Equal(got, tt.want) {
			t.Errorf("%s.Tools(%v) = %v, want %v", tt.mode, tt.beads, got, tt.want)
		}
	}
}

func TestModeRules(t *testing.T) {
	if Review.CanWrite() || Delegate.CanWrite() || !Code.CanWrite() {
		t.Error("only code mode may write")
	}
	if Review.ClaimsTasks() || !Code.ClaimsTasks() || !Delegate.ClaimsTasks() {
		t.Error("review must not claim tasks; code and delegate may")
	}
	if Delegate.Kind() != Coordinate || Code.Kind() != Execute || Review.Kind() != Execute {
		t.Error("mode kinds are wrong")
	}
}

func TestParse(t *testing.T) {
	for _, n := range Names() {
		if _, err := Parse(n); err != nil {
			t.Errorf("Parse(%q): %v", n, err)
		}
	}
	if _, err := Parse("yolo"); err == nil {
		t.Error("Parse(yolo) succeeded")
	}
}
