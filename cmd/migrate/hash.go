package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/migration"
)

// cmdHash recomputes DIR/atlas.sum from the files on disk, as
// `atlas migrate hash --dir file://DIR` does, for someone who has just
// added a migration. Before writing, it checks that the runner accepts the
// directory with the new sum (file names, versions of one width); if not,
// nothing is written.
func cmdHash(_ context.Context, env *cmdEnv) error {
	// hash writes, so it works on the files on disk, never on the
	// directory embedded in the binary: by default the repository's.
	path, err := repoPath("-dir DIR", env.dir, "schema/migrations")
	if err != nil {
		return err
	}
	if err := checkDir(path); err != nil {
		return err
	}
	env.dir = path
	dir, err := migrate.NewLocalDir(env.dir)
	if err != nil {
		return err
	}
	files, err := dir.Files()
	if err != nil {
		return fmt.Errorf("read %s: %w", env.dir, err)
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
		fmt.Fprintf(env.stdout, "%s/%s is up to date (%d files)\n", env.dir, migrate.HashFileName, len(files))
		return nil
	}
	if err := migrate.WriteSumFile(dir, sum); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s/%s (%d files)\n", env.dir, migrate.HashFileName, len(files))
	return nil
}
