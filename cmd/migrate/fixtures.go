package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/securemsg/storage/fixtures/frozen"
	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/migration"
)

// fixturesPath is where the frozen fixtures live, relative to the
// repository.
const fixturesPath = "fixtures"

// fixtureDoc is one fixture's result in fixture-test's JSON document.
type fixtureDoc struct {
	Dir     string         `json:"dir"`
	Version string         `json:"version"`
	OK      bool           `json:"ok"`
	Checks  []frozen.Check `json:"checks"`
}

// fixtureTestDoc is fixture-test's JSON document.
type fixtureTestDoc struct {
	Command  string       `json:"command"` // "fixture-test"
	Head     string       `json:"head"`
	OK       bool         `json:"ok"`
	Fixtures []fixtureDoc `json:"fixtures"`
}

// cmdFixtureTest runs every fixtures/versionNN directory against head:
// version 14, which predates package frozen, through its own proof, every
// other through frozen.Prove. Each works on its own temporary copy, never
// on the frozen files.
func cmdFixtureTest(ctx context.Context, env *cmdEnv) error {
	root, err := repoPath(env.fixtures, fixturesPath)
	if err != nil {
		return err
	}
	m, err := migration.Default()
	if err != nil {
		return err
	}
	dirs, err := frozen.Find(root)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("%s: no versionNN fixture directory", root)
	}
	doc := fixtureTestDoc{Command: "fixture-test", Head: m.Head(), OK: true}
	failed := 0
	for _, d := range dirs {
		if rel, err := relToWD(d.Path); err == nil && !filepath.IsAbs(env.fixtures) {
			d.Path = rel // as a reviewer names it: fixtures/version14 from the root
		}
		var lines bytes.Buffer
		w := io.Writer(&lines)
		if !env.json {
			fmt.Fprintf(env.stdout, "== %s (version %s)\n", d.Path, d.Version)
			w = io.MultiWriter(&lines, env.stdout)
		}
		var checks []frozen.Check
		if d.Version == migration.LegacyBaselineVersion {
			err = version14.Prove(ctx, w)
			checks = parseChecks(lines.String())
		} else {
			checks, err = frozen.Prove(ctx, m, d.Path, w)
		}
		fd := fixtureDoc{Dir: d.Path, Version: d.Version, OK: err == nil, Checks: nonNil(checks)}
		if err != nil {
			failed++
			doc.OK = false
			if len(checks) == 0 || allOK(checks) {
				fd.Checks = append(fd.Checks, frozen.Check{Name: "run the proof", Error: err.Error()})
				if !env.json {
					fmt.Fprintf(env.stdout, "FAIL run the proof: %v\n", err)
				}
			}
		}
		doc.Fixtures = append(doc.Fixtures, fd)
	}
	if env.json {
		if err := env.emit(doc); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d fixture(s) failed", failed, len(dirs))
	}
	return nil
}

// relToWD returns path relative to the working directory.
func relToWD(path string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Rel(wd, path)
}

func allOK(cs []frozen.Check) bool {
	for _, c := range cs {
		if !c.OK {
			return false
		}
	}
	return true
}

// parseChecks reads version14.Prove's lines ("ok   check" or
// "FAIL check: reason", as its README documents).
func parseChecks(out string) []frozen.Check {
	var cs []frozen.Check
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "ok   "):
			cs = append(cs, frozen.Check{Name: strings.TrimPrefix(l, "ok   "), OK: true})
		case strings.HasPrefix(l, "FAIL "):
			name, reason, _ := strings.Cut(strings.TrimPrefix(l, "FAIL "), ": ")
			cs = append(cs, frozen.Check{Name: name, Error: reason})
		}
	}
	return cs
}

// cmdFreeze freezes a head database sealed with the fixture test key into
// a new fixtures/versionNN directory (frozen.Freeze); it never overwrites
// one and never changes the database.
func cmdFreeze(ctx context.Context, env *cmdEnv) error {
	path, m, err := env.target()
	if err != nil {
		return err
	}
	out := env.out
	if out == "" {
		root, err := repoPath("", fixturesPath)
		if err != nil {
			return err
		}
		out = filepath.Join(root, "version"+m.Head())
	}
	conn, err := openExisting(path)
	if err != nil {
		return err
	}
	conn.Close() // opened only to refuse what is not a database: Freeze reads a copy
	if err := frozen.Freeze(ctx, m, path, out); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "froze %s into %s (%s, %s, %s)\n", path, out, frozen.FixtureFile, frozen.ContentsFile, frozen.ReadmeFile)
	return nil
}
