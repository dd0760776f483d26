package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
)

// quoteIdent returns name as an SQLite identifier between backticks, a
// backtick in it doubled: whatever name holds, it stays one identifier.
func quoteIdent(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// planQuoted returns Atlas's plan of changes, which bring got to head, as
// SchemaChanges. Atlas writes an identifier between backticks without
// doubling a backtick in it, so a name read from the database (a planted
// table or index) that holds one would end the identifier early and turn
// the rest of the name into statements of its own. Each such name of got
// is planned under a placeholder that needs no quoting, then written back
// with quoteIdent in the statement and Go-quoted in the comment, as Atlas
// writes names there. A placeholder left anywhere else in a statement is
// an error: the statement could not be shown as SQL that does what it
// says. The cost is linear in the size of both schemas, planted names
// included.
func planQuoted(ctx context.Context, got, head *schema.Realm, changes []schema.Change) ([]SchemaChange, error) {
	var (
		names []*string // got's names that hold a backtick
		taken []string  // every name of got and head
	)
	for _, r := range []*schema.Realm{got, head} {
		for _, p := range identifiers(r) {
			taken = append(taken, *p)
			if r == got && strings.Contains(*p, "`") {
				names = append(names, p)
			}
		}
	}
	// Placeholders are prefix, a number and an underscore: no name holds
	// prefix, so a placeholder found in Atlas's text is one of them.
	prefix := "drift_quoted_name_"
	if longest := containing(taken, prefix); longest > 0 {
		prefix += strings.Repeat("x", longest) + "_" // longer than any name
	}
	restore := map[string]string{} // placeholder to name
	byName := map[string]string{}  // name to placeholder: one a name
	orig := make([]string, len(names))
	for i, p := range names {
		orig[i] = *p
		ph, ok := byName[*p]
		if !ok {
			ph = fmt.Sprintf("%s%d_", prefix, len(byName))
			byName[*p], restore[ph] = ph, *p
		}
		*p = ph
	}
	defer func() {
		for i, p := range names {
			*p = orig[i]
		}
	}()

	plan, err := sqlite.DefaultPlan.PlanChanges(ctx, "drift", changes)
	if err != nil {
		return nil, fmt.Errorf("migration: plan the difference with head: %w", err)
	}
	if len(restore) == 0 {
		out := make([]SchemaChange, 0, len(plan.Changes))
		for _, c := range plan.Changes {
			out = append(out, SchemaChange{Comment: c.Comment, SQL: c.Cmd})
		}
		return out, nil
	}
	ph := regexp.QuoteMeta(prefix) + "[0-9]+_"
	var (
		inBackticks = regexp.MustCompile("`(" + ph + ")`")
		inQuotes    = regexp.MustCompile(`"(` + ph + `)"`)
		bare        = regexp.MustCompile(ph)
	)
	// name returns the name of the placeholder m holds (submatch 1 of re).
	name := func(re *regexp.Regexp, m string) string { return restore[re.FindStringSubmatch(m)[1]] }
	out := make([]SchemaChange, 0, len(plan.Changes))
	for _, c := range plan.Changes {
		cmd := inBackticks.ReplaceAllStringFunc(c.Cmd, func(m string) string { return quoteIdent(name(inBackticks, m)) })
		if left := bare.FindString(cmd); left != "" {
			return nil, fmt.Errorf("migration: plan the difference with head: %q cannot be quoted where Atlas writes it: %s", restore[left], c.Comment)
		}
		comment := inQuotes.ReplaceAllStringFunc(c.Comment, func(m string) string { return strconv.Quote(name(inQuotes, m)) })
		comment = bare.ReplaceAllStringFunc(comment, func(m string) string { return restore[m] })
		out = append(out, SchemaChange{Comment: comment, SQL: cmd})
	}
	return out, nil
}

// identifiers returns a pointer to every name of r's tables that Atlas
// may write into a statement as an identifier: the table's, its columns',
// indexes', primary key's, foreign keys' and checks'.
func identifiers(r *schema.Realm) []*string {
	var out []*string
	for _, s := range r.Schemas {
		for _, t := range s.Tables {
			out = append(out, &t.Name)
			for _, c := range t.Columns {
				out = append(out, &c.Name)
			}
			if t.PrimaryKey != nil {
				out = append(out, &t.PrimaryKey.Name)
			}
			for _, idx := range t.Indexes {
				out = append(out, &idx.Name)
			}
			for _, fk := range t.ForeignKeys {
				out = append(out, &fk.Symbol)
			}
			for _, a := range t.Attrs {
				if c, ok := a.(*schema.Check); ok {
					out = append(out, &c.Name)
				}
			}
		}
	}
	return out
}

// containing returns the length of the longest of ss that holds sub, 0
// if none does.
func containing(ss []string, sub string) int {
	longest := 0
	for _, s := range ss {
		if strings.Contains(s, sub) {
			longest = max(longest, len(s))
		}
	}
	return longest
}
