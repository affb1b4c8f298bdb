package engine

import (
	"bytes"
	"encoding/json"
)

// LogJSON is v as one line of JSON for a session log, which people read:
// unlike json.Marshal it keeps <, > and & as they are, so a shell command
// such as `make > out.txt && echo ok` reads as typed, not as \u003e and
// \u0026.
func LogJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
