package frozen

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// checkList records a proof's checks as they complete, each written to w.
type checkList struct {
	w      io.Writer
	checks []Check
	failed int
}

// report records the check name with its outcome err (a *DataError's
// line points into the fixture file) and reports whether it passed.
func (l *checkList) report(name string, err error) bool {
	c := Check{Name: name, OK: err == nil}
	if err != nil {
		l.failed++
		c.Error = err.Error()
	}
	var de *DataError
	if errors.As(err, &de) && de.Line > 0 {
		c.File, c.Line = FixtureFile, de.Line
	}
	l.checks = append(l.checks, c)
	fmt.Fprintln(l.w, c)
	return err == nil
}

// result returns the checks, and an error prefixed with context if one
// failed.
func (l *checkList) result(context string) ([]Check, error) {
	if l.failed > 0 {
		return l.checks, fmt.Errorf("%s%d of %d checks failed", context, l.failed, len(l.checks))
	}
	return l.checks, nil
}

// tempFixture returns the path of a database file in a new temporary
// directory, which cleanup removes: a proof works on its own copy.
func tempFixture(prefix string) (path string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("frozen: %w", err)
	}
	return filepath.Join(tmp, "fixture.db"), func() { os.RemoveAll(tmp) }, nil
}
