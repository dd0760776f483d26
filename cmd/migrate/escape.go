// What a command prints from a database file (table, index and trigger
// names, schema_revision rows, SQL) is the file writer's text: it is
// escaped for the output it goes to, so that it cannot start a line of its
// own, move the terminal's cursor or run a CI system's workflow command
// (GitHub Actions runs any log line that starts with "::"). One function
// per output format: escapeText for text and gcc, escapeData and
// escapeProperty for -format github. -json needs none (encoding/json
// escapes control characters).

package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escapeText returns s for a line of text or gcc output: every control
// character (C0, DEL, C1), line or paragraph separator, bidirectional
// formatting character and invalid UTF-8 byte written as \xNN or \uNNNN,
// so that s spans one line and shows as it is; and, when s starts with
// "::" (after blanks), its first colon as \x3a, so that s at the start of
// a line is no workflow command.
func escapeText(s string) string {
	var b strings.Builder
	lead := true // only blanks so far
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == '\u200e' || r == '\u200f' || r == '\u061c':
			fmt.Fprintf(&b, `\u%04x`, r)
		case lead && r == ':' && strings.HasPrefix(s[i:], "::"):
			b.WriteString(`\x3a`)
		default:
			b.WriteRune(r)
		}
		lead = lead && r == ' '
		i += size
	}
	return b.String()
}

// escapeStatement returns the SQL statement s for text output as it is
// laid out, each line escaped as escapeText writes it: a migration file's
// text cannot move the cursor or start a workflow command, and its line
// breaks (LF or CRLF, written as LF) and tabs stay.
func escapeStatement(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(strings.TrimSuffix(l, "\r"), "\t")
		for j, p := range parts {
			parts[j] = escapeText(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// escapeData returns s as the data (message) of a GitHub Actions
// workflow command, escaped as the runner unescapes it (% as %25, CR as
// %0D, LF as %0A), its other control characters as escapeText writes them.
func escapeData(s string) string {
	return escapeText(strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s))
}

// escapeProperty returns s as a property value of a GitHub Actions
// workflow command (file=...): as escapeData, and the colon and the
// comma that end a property as %3A and %2C.
func escapeProperty(s string) string {
	return escapeText(strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s))
}
