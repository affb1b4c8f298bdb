package tomlfile

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Suggest returns the candidate that word was most likely meant to be, or ""
// when none is close enough to be worth a "did you mean".
//
// A candidate equal to word but for case wins first ("Backend" gives
// "backend"). Otherwise the nearest candidate by Damerau-Levenshtein
// distance (optimal string alignment: insertions, deletions, substitutions
// and swaps of neighbours each cost 1) is chosen, comparing without case
// and with '-' and '_' alike, if it is at most a third of word's length
// away (at least 1) and not as far as word is long. Ties go to the earlier
// candidate, so the answer is deterministic.
func Suggest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	for _, c := range candidates {
		if strings.EqualFold(word, c) {
			return c
		}
	}
	w := fold(word)
	limit := max(1, len(w)/3)
	if limit >= len(w) {
		limit = len(w) - 1
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		cr := fold(c)
		if d := len(cr) - len(w); d > limit || -d > limit {
			continue // too far apart in length alone
		}
		if d := distance(w, cr, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// fold lower-cases s and spells '-' as '_', as runes.
func fold(s string) []rune {
	out := make([]rune, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		if r == '-' {
			r = '_'
		}
		out = append(out, unicode.ToLower(r))
	}
	return out
}

// distance is the optimal string alignment distance between a and b, or
// any value of at least bound once it is sure to reach bound.
func distance(a, b []rune, bound int) int {
	// Three rows of the dynamic-programming table: two back, one back, now.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
			rowMin = min(rowMin, d)
		}
		if rowMin >= bound {
			return bound
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
