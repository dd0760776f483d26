package pipeline

import (
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
)

// nolint is the atlas:nolint directives of one migration file, read as
// Atlas's migrate lint reads them:
//
//   - "-- atlas:nolint" alone in the file's header (comments a blank line
//     separates from the first statement) leaves the whole file out;
//   - "-- atlas:nolint A B" in the header applies A and B to every
//     statement of the file;
//   - "-- atlas:nolint [A B]" among a statement's own comments applies to
//     that statement: without arguments to every diagnostic at it, with
//     arguments to those whose code (DS103) or analyzer (destructive) is
//     named.
//
// A diagnostic belongs to the statement at its position. A table rebuild
// that lint reads as one change (foldRebuilds) takes the directives of
// each of its four statements.
type nolint struct {
	ignored bool             // the whole file is left out
	rules   map[int][]string // statement position -> directive arguments
}

// nolintOf reads the directives of f, whose statements are stmts and whose
// changes, as the analyzers see them, are changes.
func nolintOf(f migrate.File, stmts []*migrate.Stmt, changes []*migrate.Stmt) nolint {
	n := nolint{rules: map[int][]string{}}
	ds := migrate.NewLocalFile(f.Name(), f.Bytes()).Directive("nolint")
	if n.ignored = len(ds) == 1 && ds[0] == ""; n.ignored {
		return n
	}
	// Each statement's comments once: a folded rebuild repeats those of
	// its first statement at the same position.
	comments := map[int][]string{}
	for _, s := range append(slices.Clone(stmts), changes...) {
		for _, c := range s.Comments {
			if !slices.Contains(comments[s.Pos], c) {
				comments[s.Pos] = append(comments[s.Pos], c)
			}
		}
		if _, ok := comments[s.Pos]; !ok {
			comments[s.Pos] = nil
		}
	}
	for pos, cs := range comments {
		for _, d := range append(slices.Clone(ds), (&migrate.Stmt{Comments: cs}).Directive("nolint")...) {
			n.rules[pos] = append(n.rules[pos], strings.Split(d, " ")...)
		}
	}
	return n
}

// skips reports whether the directives leave out a diagnostic of analyzer
// with code at pos.
func (n nolint) skips(pos int, analyzer, code string) bool {
	if n.ignored {
		return true
	}
	rules := n.rules[pos]
	return (len(rules) == 1 && rules[0] == "") || (code != "" && slices.Contains(rules, code)) || slices.Contains(rules, analyzer)
}
