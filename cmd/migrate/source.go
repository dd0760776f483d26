package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/internal/migration"
)

// embeddedSource is how a run names the migration directory embedded in
// the binary, in its text and in its JSON document.
const embeddedSource = "embedded"

// checkoutMigrations is the migration directory of a checkout, relative
// to its root.
const checkoutMigrations = "schema/migrations"

// dirFlag declares -dir, the migration directory a command reads.
func dirFlag(fs *flag.FlagSet, env *cmdEnv) {
	fs.StringVar(&env.dir, "dir", "", "migration `DIR` to read, with its atlas.sum (default: the checkout's "+checkoutMigrations+" from any directory of it; outside a checkout, the directory embedded in this binary)")
}

// checkoutDir returns the absolute path of the schema/migrations directory
// of the checkout holding the working directory, or an error wrapping
// errNotInRepo outside one (or when it has no such directory).
func checkoutDir() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, filepath.FromSlash(checkoutMigrations))
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", errNotInRepo, path)
	}
	return path, nil
}

// migrations returns the Migrator of the directory the command reads: -dir
// if set; else, inside a checkout, its schema/migrations as it is on disk
// (a binary built before a file was added still reads it, declarations
// included); only outside a checkout the directory embedded in the binary
// (env.embedded). It records which, and its head, in the command's JSON
// document ("embedded", the -dir path, or "schema/migrations") and says
// so on stderr in text mode ("migrate: migrations schema/migrations, head
// 15"). It returns an error if -dir is not a directory, or one wrapping
// schema.ErrChecksum or migration.ErrDirectory if the directory is
// damaged.
func (env *cmdEnv) migrations() (*migration.Migrator, error) {
	source, path := embeddedSource, env.dir
	if path != "" {
		source = path
	} else if dir, err := env.checkout(); err == nil {
		source, path = checkoutMigrations, dir
	}
	if env.doc != nil {
		// Named also when the directory cannot be read: the document
		// says which one failed.
		env.doc.header().Migrations = source
	}
	var (
		m   *migration.Migrator
		err error
	)
	if path != "" {
		if err := checkDir(path); err != nil {
			return nil, err
		}
		m, err = migration.New(os.DirFS(path), ".")
		if err != nil && env.dir == "" {
			err = fmt.Errorf("%s: %w", checkoutMigrations, err)
		}
	} else {
		m, err = env.embedded()
	}
	if err != nil {
		return nil, err
	}
	if env.doc != nil {
		h := env.doc.header()
		h.Migrations, h.Head = source, m.Head()
	}
	if !env.json {
		fmt.Fprintf(env.stderr, "migrate: migrations %s, head %s\n", source, m.Head())
	}
	return m, nil
}
