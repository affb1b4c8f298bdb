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

// TestDialectsHaveTheSameMigrations fails when one dialect has a
// migration the other lacks: port it (see the package comment).
func TestDialectsHaveTheSameMigrations(t *testing.T) {
	byDialect := map[string]map[int]string{}
	for _, d := range Dialects {
		ms, err := For(d)
		if err != nil {
			t.Fatal(err)
		}
		byDialect[d] = map[int]string{}
		for _, m := range ms {
			byDialect[d][m.Version] = m.Name
		}
	}
	for _, a := range Dialects {
		for _, b := range Dialects {
			for v, name := range byDialect[a] {
				other, ok := byDialect[b][v]
				if !ok {
					t.Errorf("%s has migration %04d_%s but %s has none: port it to migrations/%s/%04d_%s.sql", a, v, name, b, b, v, name)
				} else if other != name && a < b {
					t.Errorf("migration %04d is %q in %s but %q in %s: give the port the same name", v, name, a, other, b)
				}
			}
		}
	}
}

func TestPostgresIsADialect(t *testing.T) {
	if _, err := For("postgres"); err != nil {
		t.Fatal(err)
	}
}
