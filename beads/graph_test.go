package beads

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func graphFixture(t *testing.T, name string) []Issue {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "graph", name))
	if err != nil {
		t.Fatal(err)
	}
	issues, err := ParseReady(b)
	if err != nil {
		t.Fatal(err)
	}
	return issues
}

func TestLayers(t *testing.T) {
	issues := graphFixture(t, "list_graph.json")
	got := Layers(issues)
	want := Plan{Groups: [][]string{{"demo-x9", "demo-e1.1"}, {"demo-e1.2", "demo-e1.3"}, {"demo-e1.4"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Layers = %+v, want %+v", got, want)
	}
	// Closing A (it leaves bd list) frees B and C.
	got = Layers(issues[2:])
	want = Plan{Groups: [][]string{{"demo-x9", "demo-e1.2", "demo-e1.3"}, {"demo-e1.4"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after A closed: %+v, want %+v", got, want)
	}
	if p := Layers(nil); p.Groups != nil || p.Cycle != nil {
		t.Fatalf("no issues: %+v", p)
	}
}

func TestLayersReportsACycle(t *testing.T) {
	got := Layers(graphFixture(t, "list_cycle.json"))
	want := Plan{Groups: [][]string{{"demo-c4"}}, Cycle: []string{"demo-c1", "demo-c2", "demo-c3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Layers = %+v, want %+v", got, want)
	}
}

// Every layer depends only on layers before it, whatever the input order.
func TestLayersOrderIsTopological(t *testing.T) {
	issues := graphFixture(t, "list_graph.json")
	for i := range issues {
		rot := append(append([]Issue{}, issues[i:]...), issues[:i]...)
		p := Layers(rot)
		at := map[string]int{}
		for n, g := range p.Groups {
			for _, id := range g {
				at[id] = n
			}
		}
		for _, is := range issues {
			for _, d := range is.Dependencies {
				if d.Type == DepBlocks && at[d.IssueID] <= at[d.DependsOnID] {
					t.Fatalf("rotation %d: %s is not after its blocker %s: %v", i, d.IssueID, d.DependsOnID, p.Groups)
				}
			}
		}
	}
}

func TestBatches(t *testing.T) {
	issues := graphFixture(t, "list_graph.json")
	got := Batches(issues, 1)
	want := [][]string{{"demo-x9"}, {"demo-e1.1"}, {"demo-e1.2"}, {"demo-e1.3"}, {"demo-e1.4"}}
	if !reflect.DeepEqual(got.Groups, want) {
		t.Fatalf("Batches(1) = %v, want %v", got.Groups, want)
	}
	if got := Batches(issues, 0); !reflect.DeepEqual(got, Layers(issues)) {
		t.Fatalf("Batches(0) = %v", got)
	}
}

func TestSubtree(t *testing.T) {
	issues := graphFixture(t, "list_graph.json")
	var ids []string
	for _, i := range Subtree(issues, "demo-e1") {
		ids = append(ids, i.ID)
	}
	if want := []string{"demo-e1.1", "demo-e1.2", "demo-e1.3", "demo-e1.4"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Subtree = %v, want %v", ids, want)
	}
	if got := Subtree(issues, "demo-x9"); len(got) != 0 {
		t.Fatalf("a leaf's subtree: %v", got)
	}
	// The real fixture: demo-9z2.1 is demo-9z2's child by its parent field.
	real, err := ParseReady(fixture(t, "list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Subtree(real, "demo-9z2"); len(got) != 1 || got[0].ID != "demo-9z2.1" {
		t.Fatalf("Subtree(list.json, demo-9z2) = %v", ids)
	}
	if got := Layers(real); len(got.Groups) != 2 || got.Groups[1][0] != "demo-2yt" {
		t.Fatalf("Layers(list.json) = %+v: demo-2yt waits on demo-9z2.1", got)
	}
}
