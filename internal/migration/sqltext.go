package migration

// Normalised SQL text of schema objects: what sqlite_master.sql says, with
// spacing, comments, identifier quoting and the case of keywords and
// identifiers taken out, so that two definitions compare equal when SQLite
// reads them the same way.

import (
	"strings"
	"unicode/utf8"
)

// token is one lexical token of a statement.
type token struct {
	text string
	// ident is set for an identifier written quoted ("x", `x`, [x]):
	// it is unquoted in text, and never taken for a keyword.
	ident bool
}

// tokenize splits SQL into tokens: whitespace and comments dropped, bare
// words lowercased (keywords and identifiers alike: SQLite reads both
// without regard to ASCII case, and only ASCII letters are lowercased,
// lowerASCII), quoted identifiers unquoted and lowercased, string
// literals kept as written, blob literals lowercased.
// Text it cannot read (an unterminated literal) is kept as one token, so
// that it still compares.
func tokenize(sql string) []token {
	var out []token
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '\'':
			end := quoted(sql, i, '\'')
			out = append(out, token{text: sql[i:end]})
			i = end
		case c == '"' || c == '`':
			end := quoted(sql, i, c)
			body := sql[i+1 : max(end-1, i+1)]
			body = strings.ReplaceAll(body, string([]byte{c, c}), string(c))
			out = append(out, token{text: lowerASCII(body), ident: true})
			i = end
		case c == '[':
			end := strings.IndexByte(sql[i:], ']')
			if end < 0 {
				end = len(sql) - i - 1
			}
			out = append(out, token{text: lowerASCII(sql[i+1 : i+end]), ident: true})
			i += end + 1
		case (c == 'x' || c == 'X') && i+1 < len(sql) && sql[i+1] == '\'':
			end := quoted(sql, i+1, '\'')
			out = append(out, token{text: lowerASCII(sql[i:end])})
			i = end
		case isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			out = append(out, token{text: lowerASCII(sql[i:j])})
			i = j
		default:
			// Operators: the two-byte ones SQLite knows, else one rune.
			if i+1 < len(sql) {
				switch two := sql[i : i+2]; two {
				case "||", "<=", ">=", "==", "!=", "<>", "<<", ">>", "->":
					if two == "->" && i+2 < len(sql) && sql[i+2] == '>' {
						two = "->>"
					}
					out = append(out, token{text: two})
					i += len(two)
					continue
				}
			}
			_, n := utf8.DecodeRuneInString(sql[i:])
			out = append(out, token{text: sql[i : i+n]})
			i += n
		}
	}
	return out
}

// quoted returns the end (exclusive) of the literal opened by q at i, a
// doubled q standing for itself; len(sql) if it is not closed.
func quoted(sql string, i int, q byte) int {
	for j := i + 1; j < len(sql); j++ {
		if sql[j] == q {
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// lowerASCII returns s with the ASCII capitals A to Z lowercased and
// every other byte kept: SQLite reads keywords and names without regard
// to ASCII case only, so a name holding "İ" (U+0130) or the Kelvin sign
// (U+212A) is another name to it, which Unicode lowercasing would take
// for a defined one ("recİpient" for "recipient").
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// equalFoldASCII reports whether a and b are one name to SQLite: equal
// but for the case of ASCII letters (see lowerASCII).
func equalFoldASCII(a, b string) bool { return lowerASCII(a) == lowerASCII(b) }

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// isWord reports whether t is the bare word w (a keyword where SQLite
// expects one), not a quoted identifier spelled the same.
func (t token) isWord(w string) bool { return !t.ident && t.text == w }

// render writes tokens back as one line of SQL: single spaces, none inside
// parentheses or before a comma, and quoted identifiers quoted again
// (when they need it) so that no identifier reads as a keyword.
func render(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			prev := toks[i-1].text
			if !(t.text == "," || t.text == ")" || t.text == "." || prev == "(" || prev == ".") {
				b.WriteByte(' ')
			}
		}
		if t.ident && !plainIdent(t.text) {
			b.WriteString(`"` + strings.ReplaceAll(t.text, `"`, `""`) + `"`)
		} else {
			b.WriteString(t.text)
		}
	}
	return b.String()
}

// plainIdent reports whether an identifier can be written bare without
// reading as something else: letters, digits and underscores, not
// starting with a digit, and not a keyword.
func plainIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return !keywords[s]
}

// keywords are SQLite's keywords (sqlite3_keyword_name), lowercased.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`abort action add after all alter always analyze and as asc attach
		autoincrement before begin between by cascade case cast check collate column commit conflict
		constraint create cross current current_date current_time current_timestamp database default
		deferrable deferred delete desc detach distinct do drop each else end escape except exclude
		exclusive exists explain fail filter first following for foreign from full generated glob group
		groups having if ignore immediate in index indexed initially inner insert instead intersect into
		is isnull join key last left like limit match materialized natural no not nothing notnull null
		nulls of offset on or order others outer over partition plan pragma preceding primary query raise
		range recursive references regexp reindex release rename replace restrict returning right rollback
		row rows savepoint select set table temp temporary then ties to transaction trigger unbounded union
		unique update using vacuum values view virtual when where window with without`) {
		m[k] = true
	}
	return m
}()

// parenEnd returns the index of the token closing the parenthesis opened
// at toks[open], -1 if it is never closed.
func parenEnd(toks []token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case toks[i].ident:
		case toks[i].text == "(":
			depth++
		case toks[i].text == ")":
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// splitTop splits toks at the commas outside any parenthesis.
func splitTop(toks []token) [][]token {
	var out [][]token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.ident:
		case t.text == "(":
			depth++
		case t.text == ")":
			depth--
		case t.text == "," && depth == 0:
			out = append(out, toks[start:i])
			start = i + 1
		}
	}
	return append(out, toks[start:])
}

// indexDefaults returns an index's definition from its ON, toks, without
// the words that state a key column's default: a trailing ASC, and
// COLLATE BINARY. Both define the very index their absence does (on the
// head's columns, all BINARY: a column's own collation is a fact of its
// table's, and SQLite's pragma_index_xinfo, compared once the texts
// agree, reports each key column's collation and order whatever the
// text says). Only the key column list is touched, not a partial WHERE.
func indexDefaults(toks []token) []token {
	open := -1
	for i, t := range toks {
		if !t.ident && t.text == "(" {
			open = i
			break
		}
	}
	if open < 0 {
		return toks
	}
	end := parenEnd(toks, open)
	if end < 0 {
		return toks
	}
	out := append([]token{}, toks[:open+1]...)
	for i, el := range splitTop(toks[open+1 : end]) {
		if i > 0 {
			out = append(out, token{text: ","})
		}
		if n := len(el); n > 1 && el[n-1].isWord("asc") {
			el = el[:n-1]
		}
		for j := 0; j < len(el); j++ {
			if j+1 < len(el) && el[j].isWord("collate") && el[j+1].text == "binary" {
				j++
				continue
			}
			out = append(out, el[j])
		}
	}
	return append(out, toks[end:]...)
}

// sqlFacts are the parts of an object's definition its stored SQL states,
// keyed by what they define: for a table, "column NAME" (the column's
// type and constraints), "constraint ..." (each table constraint),
// "kind" (a virtual or temporary table, and its module) and "options"
// (WITHOUT ROWID, STRICT); for an index, "kind" (UNIQUE or not)
// and "definition" (its table, columns, collations, expressions and
// partial WHERE); for anything else, "definition". The object's own name
// is not a fact: objects are matched by name.
func sqlFacts(typ, sql string) map[string]string {
	toks := tokenize(sql)
	facts := map[string]string{}
	switch typ {
	case "table":
		open := -1
		for i, t := range toks {
			if t.isWord("as") {
				break
			}
			if !t.ident && t.text == "(" {
				open = i
				break
			}
		}
		end := -1
		if open >= 0 {
			end = parenEnd(toks, open)
		}
		if end < 0 {
			facts["definition"] = render(toks)
			return facts
		}
		// The words before the name and the column list say what kind
		// of table SQLite makes of them, which the pragmas do not tell: a
		// virtual table's module takes the column list as its arguments.
		kind := "table"
		for i, t := range toks[:open] {
			if t.isWord("temp") || t.isWord("temporary") || t.isWord("virtual") {
				kind = t.text + " " + kind
			}
			if t.isWord("using") {
				kind += " " + render(toks[i:open])
				break
			}
		}
		facts["kind"] = kind
		for _, el := range splitTop(toks[open+1 : end]) {
			if len(el) == 0 {
				continue
			}
			switch first := el[0]; {
			case first.isWord("constraint") || first.isWord("primary") || first.isWord("unique") || first.isWord("check") || first.isWord("foreign"):
				facts["constraint "+render(el)] = "present"
			default:
				facts["column "+first.text] = render(el[1:])
			}
		}
		facts["options"] = render(toks[end+1:])
	case "index":
		kind := "index"
		on := -1
		for i, t := range toks {
			if t.isWord("unique") && on < 0 {
				kind = "unique index"
			}
			if t.isWord("on") {
				on = i
				break
			}
		}
		facts["kind"] = kind
		if on < 0 {
			facts["definition"] = render(toks)
		} else {
			facts["definition"] = render(indexDefaults(toks[on:]))
		}
	default:
		facts["definition"] = render(toks)
	}
	return facts
}
