package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/internal/migration"
)

// cmdHash recomputes DIR/atlas.sum from the files on disk, as
// `atlas migrate hash --dir file://DIR` does, for someone who has just
// added a migration. Before writing, it checks that the runner accepts the
// directory with the new sum (file names, versions of one width); if not,
// nothing is written.
func cmdHash(_ context.Context, env *cmdEnv) error {
	doc := newHashDoc("")
	env.doc = doc
	// hash writes, so it works on the files on disk, never on the
	// directory embedded in the binary: by default the repository's.
	path, err := repoPath("-dir DIR", env.dir, "schema/migrations")
	if err != nil {
		return err
	}
	doc.Migrations = path
	if err := checkDir(path); err != nil {
		return err
	}
	env.dir = path
	doc.Sum = filepath.Join(path, migrate.HashFileName)
	dir, err := migrate.NewLocalDir(env.dir)
	if err != nil {
		return err
	}
	files, err := dir.Files()
	if err != nil {
		return fmt.Errorf("read %s: %w", env.dir, err)
	}
	doc.Files = len(files)
	if len(files) > 0 {
		doc.Head = files[len(files)-1].Version()
	}
	sum, err := dir.Checksum()
	if err != nil {
		return fmt.Errorf("hash %s: %w", env.dir, err)
	}
	text, err := sum.MarshalText()
	if err != nil {
		return err
	}

	// Dry run: the directory as it will be, through the runner's checks.
	check := fstest.MapFS{migrate.HashFileName: {Data: text}}
	for _, f := range files {
		check[f.Name()] = &fstest.MapFile{Data: f.Bytes()}
	}
	if _, err := migration.New(check, "."); err != nil {
		return fmt.Errorf("%s: not written: %w", migrate.HashFileName, err)
	}

	old, err := os.ReadFile(dir.Path() + string(os.PathSeparator) + migrate.HashFileName)
	if err == nil && bytes.Equal(old, text) {
		fmt.Fprintf(env.text(), "%s/%s is up to date (%d files)\n", env.dir, migrate.HashFileName, len(files))
		return nil
	}
	if err := migrate.WriteSumFile(dir, sum); err != nil {
		return err
	}
	doc.Written = true
	fmt.Fprintf(env.text(), "wrote %s/%s (%d files)\n", env.dir, migrate.HashFileName, len(files))
	return nil
}

// hashDoc is hash's JSON document: "migrations" is the directory hashed,
// "head" its newest version.
type hashDoc struct {
	docHeader        // command "hash"
	Sum       string `json:"sum"`     // the atlas.sum path ("" until known)
	Files     int    `json:"files"`   // migration files hashed
	Written   bool   `json:"written"` // false when atlas.sum was up to date
}

// newHashDoc returns hash's document, before anything is read.
func newHashDoc(string) *hashDoc { return &hashDoc{docHeader: docHeader{Command: "hash"}} }
