package deploylint

import (
	"fmt"
	"sort"
	"strings"
)

// Finding is one broken rule.
type Finding struct {
	File string
	Line int // 1-based; 0 when the rule is about the file as a whole
	Rule string
	Msg  string
}

func (f Finding) String() string {
	loc := f.File
	if f.Line > 0 {
		loc = fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	return fmt.Sprintf("%s: %s: %s", loc, f.Rule, f.Msg)
}

// Rules returns the distinct rule names of fs, sorted.
func Rules(fs []Finding) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if !seen[f.Rule] {
			seen[f.Rule] = true
			out = append(out, f.Rule)
		}
	}
	sort.Strings(out)
	return out
}

// Format prints findings one a line, in file and line order.
func Format(fs []Finding) string {
	sorted := append([]Finding(nil), fs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].File != sorted[j].File {
			return sorted[i].File < sorted[j].File
		}
		return sorted[i].Line < sorted[j].Line
	})
	var b strings.Builder
	for _, f := range sorted {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

type collector struct {
	file string
	out  []Finding
}

func (c *collector) add(line int, rule, format string, args ...any) {
	c.out = append(c.out, Finding{File: c.file, Line: line, Rule: rule, Msg: fmt.Sprintf(format, args...)})
}
