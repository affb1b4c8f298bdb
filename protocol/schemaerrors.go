package protocol

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

func addSchemaError(c *collector, t Type, doc any, e fault) {
	p, value := instancePath(doc, e.loc)
	if p == "" {
		p = "envelope"
	}
	switch e.keyword {
	case "required":
		for _, m := range e.names {
			c.add(joinKey(trimRoot(p), m), "is required")
		}
	case "additionalProperties":
		allowed := fieldsAt(t, e.loc)
		for _, name := range e.names {
			reason := "is not a field of " + where(t, e.loc)
			if s := suggest(name, allowed); s != "" {
				reason += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if len(allowed) > 0 {
				reason += "; the fields are " + strings.Join(allowed, ", ")
			}
			c.add(joinKey(trimRoot(p), name), reason)
		}
	case "type":
		c.add(p, fmt.Sprintf("must be %s, not %s", typeNames(e.want), article(e.got)))
	case "enum":
		want := make([]string, len(e.values))
		for i, w := range e.values {
			want[i] = jsonText(w)
		}
		c.add(p, fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), jsonText(e.value)))
	case "const":
		c.add(p, fmt.Sprintf("must be %s, not %s", jsonText(e.values[0]), jsonText(e.value)))
	case "minItems":
		c.add(p, "must contain at least "+text.Plural(e.limit, "item", "items"))
	case "maxItems":
		c.add(p, fmt.Sprintf("must contain at most %s, not %d", text.Plural(e.limit, "item", "items"), e.count))
	case "minLength":
		if e.limit == 1 {
			c.add(p, "must not be empty")
		} else {
			c.add(p, fmt.Sprintf("must be at least %s long", text.Plural(e.limit, "character", "characters")))
		}
	case "maxLength":
		c.add(p, fmt.Sprintf("must be at most %s long, not %d; put long text in a file in the repository and give its path", text.Plural(e.limit, "character", "characters"), e.count))
	case "pattern":
		help := patternHelp[e.pattern]
		if help == "" {
			help = "must match " + e.pattern
		}
		c.add(p, fmt.Sprintf("%s, not %s", help, jsonText(value)))
	case "minimum":
		c.add(p, fmt.Sprintf("must be at least %s, not %s", ratText(e.rat[0]), ratText(e.rat[1])))
	case "maximum":
		c.add(p, fmt.Sprintf("must be at most %s, not %s", ratText(e.rat[0]), ratText(e.rat[1])))
	case "uniqueItems":
		c.add(p, fmt.Sprintf("lists the same value twice (items %d and %d); give each once", e.dup[0], e.dup[1]))
	default:
		c.add(p, "fails the schema's "+e.keyword)
	}
}

// trimRoot undoes the "envelope" placeholder for the root before a key is
// appended to it.
func trimRoot(p string) string {
	if p == "envelope" {
		return ""
	}
	return p
}

// patternHelp explains each pattern in the schemas in words; a test checks
// that every pattern has an entry.
var patternHelp = map[string]string{
	`^[a-z][a-z0-9-]{0,63}$`:                                             "must be an agent name (lower-case letters, digits and '-', starting with a letter)",
	`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`:                                 "must be a task id such as T-42 or bd-a1b2 (letters, digits, '.', '_' and '-', at most 128)",
	`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`: "must be an RFC 3339 UTC time with milliseconds, such as 2026-11-23T10:00:00.123Z",
	`^(task_dispatch|task_result|review_request|review_verdict|escalation|ack|ping)-[A-Za-z0-9][A-Za-z0-9._-]{0,127}-[0-9]{13}$`: "must be a msg_id such as task_dispatch-T-42-1763900000123 (copy it from the message; swarm protocol log --task ID lists them)",
	`^[0-9a-f]{7,64}$`:                        "must be a commit hash in lower-case hex, 7 to 64 digits (git rev-parse HEAD prints it)",
	`^team-[A-Za-z0-9][A-Za-z0-9._-]{0,122}$`: "must be team-<name> for a ping",
	`^[A-Z][A-Z0-9_]{0,63}$`:                  "must be an upper-case code such as CORE_BOOTSTRAP_PING",
}

// fieldsAt lists, in the contract's order, the fields allowed in the object
// at loc, read from the Go types (whose order is the contract's: required
// fields first).
func fieldsAt(t Type, loc []string) []string {
	rt := reflect.TypeFor[Envelope]()
	for i, tok := range loc {
		if i == 0 && tok == "payload" {
			p := newPayload(t)
			if p == nil {
				return nil
			}
			rt = reflect.TypeOf(p).Elem()
			continue
		}
		switch rt.Kind() {
		case reflect.Slice:
			rt = rt.Elem()
		case reflect.Struct:
			f, ok := fieldByTag(rt, tok)
			if !ok {
				return nil
			}
			rt = f.Type
		default:
			return nil
		}
	}
	if rt.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range rt.NumField() {
		if name := jsonName(rt.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func fieldByTag(rt reflect.Type, name string) (reflect.StructField, bool) {
	for i := range rt.NumField() {
		if f := rt.Field(i); jsonName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// where names the object an unknown field was found in.
func where(t Type, loc []string) string {
	switch {
	case len(loc) == 0:
		return "the envelope"
	case len(loc) == 1 && loc[0] == "payload":
		if t != "" && strings.ContainsRune("aeiou", rune(t[0])) {
			return "an " + string(t) + " payload"
		}
		return "a " + string(t) + " payload"
	case len(loc) == 3 && loc[1] == "subtasks":
		return "a subtask"
	}
	return "this object"
}

// suggest returns the allowed name closest to a mistyped one, if it is
// close: a few edits away (acceptance_criterias, risk-level), or a prefix
// of it (desc).
func suggest(name string, allowed []string) string {
	lower := strings.ToLower(name)
	best, bestD := "", max(2, len(name)/4)+1
	for _, a := range allowed {
		d := levenshtein(lower, a)
		if len(lower) >= 3 && strings.HasPrefix(a, lower) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func typeNames(want []string) string {
	s := make([]string, len(want))
	for i, w := range want {
		s[i] = article(w)
	}
	switch len(s) {
	case 1:
		return s[0]
	default:
		return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
	}
}

// article names a JSON type the way a sentence needs it.
func article(jsonType string) string {
	switch jsonType {
	case "null":
		return "null"
	case "integer":
		return "a whole number"
	case "array", "object":
		return "an " + jsonType
	case "boolean":
		return "true or false"
	}
	return "a " + jsonType
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}

// jsonText shows a value as JSON, cut short so an error stays one line.
func jsonText(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 60 {
		s = cutRunes(s, 57) + "…"
	}
	return s
}

// cutRunes returns the first n runes of s.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
