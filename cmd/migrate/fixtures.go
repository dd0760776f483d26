package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/fixtures/frozen"
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
	docHeader              // command "fixture-test"
	Fixtures  []fixtureDoc `json:"fixtures"`
}

// cmdFixtureTest proves every fixtures/versionNN directory against head
// with frozen.Prove, the version-14 fixture like any other. Each proof
// works on its own temporary copy, never on the frozen files.
func cmdFixtureTest(ctx context.Context, env *cmdEnv) error {
	doc := &fixtureTestDoc{docHeader: docHeader{Command: "fixture-test"}, Fixtures: []fixtureDoc{}}
	env.doc = doc
	root, err := repoPath(env.fixtures, fixturesPath)
	if err != nil {
		return err
	}
	m, err := env.migrations()
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
	failed := 0
	for _, d := range dirs {
		if rel, err := relToWD(d.Path); err == nil && !filepath.IsAbs(env.fixtures) {
			d.Path = rel // as a reviewer names it: fixtures/version14 from the root
		}
		w := io.Discard
		if !env.json {
			fmt.Fprintf(env.stdout, "== %s (version %s)\n", d.Path, d.Version)
			w = env.stdout
		}
		checks, err := frozen.Prove(ctx, m, d.Path, w)
		fd := fixtureDoc{Dir: d.Path, Version: d.Version, OK: err == nil, Checks: nonNil(checks)}
		if err != nil {
			failed++
			if len(checks) == 0 || allOK(checks) {
				fd.Checks = append(fd.Checks, frozen.Check{Name: "run the proof", Error: err.Error()})
				if !env.json {
					fmt.Fprintf(env.stdout, "FAIL run the proof: %v\n", err)
				}
			}
		}
		doc.Fixtures = append(doc.Fixtures, fd)
	}
	if failed > 0 {
		return findingf("%d of %d fixture(s) failed", failed, len(dirs))
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
	// Read only to refuse what is not a database: Freeze reads a copy.
	if err := env.readExisting(ctx, path, func(*sql.DB) error { return nil }); err != nil {
		return err
	}
	if err := frozen.Freeze(ctx, m, path, out); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "froze %s into %s (%s, %s, %s)\n", path, out, frozen.FixtureFile, frozen.ContentsFile, frozen.ReadmeFile)
	return nil
}
