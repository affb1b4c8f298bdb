package config

import "github.com/swarmhq/swarm/tomlfile"

// Suggest returns the candidate that word was most likely meant to be, or ""
// when none is close. A match but for case wins ("Backend" gives "backend");
// otherwise the nearest candidate by Damerau-Levenshtein distance, within a
// third of word's length. swarm.toml's unknown-key errors use it, and
// commands use it for unknown agent names:
//
//	if s := config.Suggest(name, cfg.Recipients()); s != "" {
//		msg += fmt.Sprintf("; did you mean %q?", s)
//	}
func Suggest(word string, candidates []string) string {
	return tomlfile.Suggest(word, candidates)
}
