package migrations

import "testing"

func TestEveryDialectNumberedInOrder(t *testing.T) {
	for _, d := range Dialects {
		ms, err := For(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("%s: no migrations", d)
		}
		for i, m := range ms {
			if m.Version != i+1 || m.Name == "" || m.SQL == "" {
				t.Errorf("%s migration %d: %+v", d, i, m.Version)
			}
		}
	}
}

func TestUnknownDialect(t *testing.T) {
	if _, err := For("oracle"); err == nil {
		t.Fatal("want an error for an unknown dialect")
	}
}
