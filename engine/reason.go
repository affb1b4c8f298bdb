package engine

import "strings"

// Reason is an engine's error without the name prefixes the engine and
// its model add ("exec engine claude: ", "engine gemini: ", "gemini: "),
// for a caller whose line names the engine already: "engine gemini
// (agent backend): no API key …", not "… engine gemini: gemini: no API
// key …".
func Reason(err error, name string) string {
	msg := err.Error()
	for _, p := range []string{"exec engine " + name + ": ", "engine " + name + ": ", name + ": "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}
