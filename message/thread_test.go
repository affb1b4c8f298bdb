package message

import (
	"strings"
	"testing"
)

func TestTree(t *testing.T) {
	p := func(n int64) *int64 { return &n }
	ms := []Message{ // out of order on purpose
		{ID: 5, ReplyTo: p(2), Body: "d"},
		{ID: 1, Body: "a"},
		{ID: 2, ReplyTo: p(1), Body: "b"},
		{ID: 3, ReplyTo: p(1), Body: "c"},
		{ID: 4, ReplyTo: p(2), Body: "e"},
		{ID: 7, ReplyTo: p(6), Body: "orphan"}, // its parent was pruned
	}
	var b strings.Builder
	for _, r := range Tree(ms) {
		b.WriteString(r.Prefix + r.Message.Body + "\n")
	}
	want := "a\n├─ b\n│  ├─ e\n│  └─ d\n└─ c\norphan\n"
	if b.String() != want {
		t.Fatalf("tree =\n%s\nwant\n%s", b.String(), want)
	}
}
