package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/cmd/internal/pipeline"
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

// newFixtureTestDoc returns fixture-test's document, before anything is
// read (fixture-test reads no database: its argument is ignored).
func newFixtureTestDoc(string) *fixtureTestDoc {
	return &fixtureTestDoc{docHeader: docHeader{Command: "fixture-test"}, Fixtures: []fixtureDoc{}}
}

// fixtureTestDoc is fixture-test's JSON document.
type fixtureTestDoc struct {
	docHeader              // command "fixture-test"
	Fixtures  []fixtureDoc `json:"fixtures"`
}

// cmdFixtureTest proves every fixtures/versionNN directory against head
// with frozen.Prove, the version-14 fixture like any other, and the legacy
// plaintext fixture (fixtures/legacy) with frozen.ProveLegacy. Each proof
// works on its own temporary copy, never on the frozen files.
func cmdFixtureTest(ctx context.Context, env *cmdEnv) error {
	doc := newFixtureTestDoc("")
	env.doc = doc
	if err := env.checkFormat(); err != nil {
		return err
	}
	root, err := repoPath("-fixtures DIR", env.fixtures, fixturesPath)
	if err != nil {
		return err
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	// A directory that does not replay on an empty database is malformed
	// (exit 2, as every command says), not a finding of each fixture.
	head, err := pipeline.OpenHead(ctx, m)
	if err != nil {
		return err
	}
	head.Close()
	dirs, err := frozen.Find(root)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("%s: no versionNN fixture directory", root)
	}
	legacyDir, err := frozen.FindLegacy(root)
	if err != nil {
		return err
	}
	failed, total := 0, len(dirs)
	// proveOne runs one fixture's proof and records its result.
	proveOne := func(path, version, title string, prove func(string) ([]frozen.Check, error)) {
		if rel, err := relToWD(path); err == nil && !filepath.IsAbs(env.fixtures) {
			path = rel // as a reviewer names it: fixtures/version14 from the root
		}
		w := env.text()
		fmt.Fprintf(w, "== %s (%s)\n", path, title)
		checks, err := prove(path)
		fd := fixtureDoc{Dir: path, Version: version, OK: err == nil, Checks: nonNil(checks)}
		if err != nil {
			failed++
			if len(checks) == 0 || allOK(checks) {
				fd.Checks = append(fd.Checks, frozen.Check{Name: "run the proof", Error: err.Error()})
				fmt.Fprintf(w, "FAIL run the proof: %v\n", err)
			}
		}
		doc.Fixtures = append(doc.Fixtures, fd)
	}
	for _, d := range dirs {
		proveOne(d.Path, d.Version, "version "+d.Version, func(path string) ([]frozen.Check, error) {
			return frozen.Prove(ctx, m, path, env.text())
		})
	}
	// The legacy plaintext fixture, upgraded by the store to head.
	if legacyDir != "" {
		total++
		proveOne(legacyDir, frozen.LegacyFixture, "legacy plaintext layout, version 14, upgraded by the store", func(path string) ([]frozen.Check, error) {
			return frozen.ProveLegacy(ctx, m, path, env.text())
		})
	}
	missing := ""
	if env.requireHead && !slices.ContainsFunc(dirs, func(d frozen.Dir) bool { return sameVersion(d.Version, m.Head()) }) {
		// A skipped freeze: the head is proved against nothing of its
		// own, and the next version is never tested against it.
		dir := filepath.Join(root, "version"+m.Head())
		if rel, err := relToWD(dir); err == nil && !filepath.IsAbs(env.fixtures) {
			dir = rel
		}
		missing = fmt.Sprintf("no fixture is frozen at head %s (%s): run bin/migrate freeze and commit it", m.Head(), dir)
		fmt.Fprintf(env.text(), "== %s (version %s)\nFAIL %s\n", dir, m.Head(), missing)
		doc.Fixtures = append(doc.Fixtures, fixtureDoc{Dir: dir, Version: m.Head(), Checks: []frozen.Check{{Name: "a fixture frozen at head", Error: missing}}})
	}
	if env.annotating() {
		env.annotate(fixtureAnnotations(doc.Fixtures))
	}
	switch {
	case failed > 0 && missing != "":
		return findingf("%d of %d fixture(s) failed; %s", failed, total, missing)
	case failed > 0:
		return findingf("%d of %d fixture(s) failed", failed, total)
	case missing != "":
		return findingf("%s", missing)
	}
	return nil
}

// sameVersion reports whether two versions are the same number (a fixture
// directory's, version14, and a migration's, 14).
func sameVersion(a, b string) bool {
	x, errX := strconv.Atoi(a)
	y, errY := strconv.Atoi(b)
	return errX == nil && errY == nil && x == y
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
