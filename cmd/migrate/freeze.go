package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/securemsg/storage/cmd/internal/frozen"
)

// newFreezeDoc returns freeze's document for database db ("" to freeze
// the newest fixture), before anything is read.
func newFreezeDoc(db string) *freezeDoc {
	return &freezeDoc{docHeader: docHeader{Command: "freeze", DB: db}, Checks: []frozen.Check{}}
}

// freezeDoc is freeze's JSON document.
type freezeDoc struct {
	docHeader // command "freeze"; DB is the -db file, "" when freezing the newest fixture
	// From is the fixture directory migrated to head, "" with -db.
	From string `json:"from"`
	// Out is the new fixture directory ("" until known).
	Out string `json:"out"`
	// Checks is the proof of From at head (empty with -db).
	Checks []frozen.Check `json:"checks"`
}

// cmdFreeze writes a new fixtures/versionNN directory at head: with -db,
// from that head database sealed with the fixture test key
// (frozen.Freeze, which never changes it); without, from the newest
// fixture under -fixtures migrated to head after it passes its proof
// (frozen.FreezeNext). It never overwrites a directory.
func cmdFreeze(ctx context.Context, env *cmdEnv) error {
	doc := newFreezeDoc(env.db)
	env.doc = doc
	if env.db != "" {
		if _, err := env.requireDB(); err != nil {
			return err
		}
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	root, err := repoPath("-fixtures DIR", env.fixtures, fixturesPath)
	if err != nil {
		return err
	}
	out := env.out
	if out == "" {
		out = filepath.Join(root, "version"+m.Head())
	}
	doc.Out = out
	if env.db != "" {
		// Read only to refuse what is not a database: Freeze reads a copy.
		if err := env.readExisting(ctx, env.db, func(*sql.DB) error { return nil }); err != nil {
			return err
		}
		if err := frozen.Freeze(ctx, m, env.db, out); err != nil {
			return err
		}
		fmt.Fprintf(env.text(), "froze %s into %s (%s, %s, %s)\n", env.db, out, frozen.FixtureFile, frozen.ContentsFile, frozen.ReadmeFile)
		return nil
	}
	dirs, err := frozen.Find(root)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("%s: no versionNN fixture directory to migrate (give -db)", root)
	}
	from := dirs[len(dirs)-1]
	doc.From = from.Path
	w := env.text()
	fmt.Fprintf(w, "== %s (version %s), proved at head %s before it is frozen\n", from.Path, from.Version, m.Head())
	checks, err := frozen.FreezeNext(ctx, m, from.Path, out, w)
	doc.Checks = nonNil(checks)
	if err != nil {
		if errors.Is(err, frozen.ErrNotProved) {
			return &finding{msg: oneLine(err.Error())}
		}
		return err
	}
	fmt.Fprintf(w, "froze %s migrated to head %s into %s (%s, %s, %s)\n", from.Path, m.Head(), out, frozen.FixtureFile, frozen.ContentsFile, frozen.ReadmeFile)
	return nil
}
