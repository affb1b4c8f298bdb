package promptpipe

import "strings"

// SplitSections parses a rendered prompt back into its sections, for
// prompts stored as text. A section starts at a "## <title>" line whose
// title is one of Titles with a higher number than the section before;
// Render neutralizes headings inside bodies, so those cannot pose as
// sections.
func SplitSections(text string) []Section {
	var out []Section
	var body []string
	last := 0
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].Body = strings.TrimRight(strings.Join(body, "\n"), "\n")
		}
		body = body[:0]
	}
	for _, line := range strings.Split(text, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			if n := titleNumber(title); n > last {
				flush()
				out = append(out, Section{Number: n, Title: title})
				last = n
				continue
			}
		}
		body = append(body, line)
	}
	flush()
	return out
}

func titleNumber(title string) int {
	for n, t := range Titles {
		if n > 0 && t == title {
			return n
		}
	}
	return 0
}
