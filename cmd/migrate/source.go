package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ariga.io/atlas/sql/migrate"

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
	fs.StringVar(&env.dir, "dir", "", "migration `DIR` to read, with its atlas.sum (default: the directory embedded in this binary; a checkout's "+checkoutMigrations+" is used only when named)")
}

// migrations returns the Migrator of the directory the command reads: -dir
// if set, else the one embedded in the binary (env.embedded). It records
// which, and its head, in the command's JSON document and says so on stderr in text mode
// ("migrate: migrations embedded, head 15"), and warns on stderr when the
// embedded directory is used from inside a checkout whose
// schema/migrations differs from it. It returns an error if -dir is not a
// directory, or one wrapping schema.ErrChecksum or
// migration.ErrDirectory if the directory is damaged.
func (env *cmdEnv) migrations() (*migration.Migrator, error) {
	var (
		m   *migration.Migrator
		err error
	)
	source := embeddedSource
	if env.dir != "" {
		source = env.dir
	}
	if env.doc != nil {
		// Named also when the directory cannot be read: the document
		// says which one failed.
		env.doc.header().Migrations = source
	}
	if env.dir != "" {
		if err := checkDir(env.dir); err != nil {
			return nil, err
		}
		m, err = migration.New(os.DirFS(env.dir), ".")
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
	if env.dir == "" {
		if w := checkoutDiffers(m); w != "" {
			fmt.Fprintf(env.stderr, "migrate: warning: %s\n", w)
		}
	}
	return m, nil
}

// checkoutDiffers returns a warning when the working directory is inside a
// checkout of this module whose schema/migrations holds other files than
// m's directory (the embedded one), and "" when it does not (or there is
// no checkout, or its directory cannot be read: nothing to compare).
func checkoutDiffers(m *migration.Migrator) string {
	root, err := repoRoot()
	if err != nil {
		return ""
	}
	path := filepath.Join(root, checkoutMigrations)
	local, err := migrate.NewLocalDir(path)
	if err != nil {
		return ""
	}
	files, err := local.Files()
	if err != nil || len(files) == 0 {
		return ""
	}
	theirs, err := local.Checksum()
	if err != nil {
		return ""
	}
	ours, err := m.Dir().Checksum()
	if err != nil {
		return ""
	}
	onDisk, _ := fs.ReadFile(os.DirFS(path), migrate.HashFileName)
	embedded, _ := fs.ReadFile(m.Dir(), migrate.HashFileName)
	if theirs.Sum() == ours.Sum() && bytes.Equal(onDisk, embedded) {
		return ""
	}
	if rel, err := relToWD(path); err == nil {
		path = rel
	}
	return fmt.Sprintf("%s (head %s) differs from the migrations embedded in this binary (head %s), which this run uses; pass -dir %s to use the checkout's",
		path, files[len(files)-1].Version(), m.Head(), path)
}
