package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/internal/migration"
)

// gitBaseDir returns the Migrator of the migration directory lint checks
// (-dir, or the checkout's schema/migrations) as the git commit ref has
// it, read with git from the repository holding that directory, so that
// the base is the branch's, not whatever this binary was built with. It
// returns nil and no error if ref has no such directory (every file is
// new), and an error if git cannot read ref or the directory at ref does
// not match its own atlas.sum.
func gitBaseDir(ctx context.Context, env *cmdEnv, ref string) (*migration.Migrator, error) {
	dir, err := repoPath("-dir DIR", env.dir, "schema/migrations")
	if err != nil {
		return nil, err
	}
	git := func(args ...string) ([]byte, error) { return gitIn(ctx, dir, args...) }
	if _, err := git("rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return nil, fmt.Errorf("-git-base %s: not a commit of the repository holding %s", ref, dir)
	}
	prefix, err := git("rev-parse", "--show-prefix")
	if err != nil {
		return nil, fmt.Errorf("-git-base %s: %s is not in a git repository: %w", ref, dir, err)
	}
	sub := strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	names, err := git("ls-tree", "--full-tree", "--name-only", ref+":"+sub)
	if err != nil {
		return nil, nil // the directory is new since ref
	}
	fsys := fstest.MapFS{}
	for _, name := range strings.Split(strings.TrimSpace(string(names)), "\n") {
		if name != migrate.HashFileName && path.Ext(name) != ".sql" {
			continue
		}
		b, err := git("cat-file", "blob", ref+":"+path.Join(sub, name))
		if err != nil {
			return nil, fmt.Errorf("-git-base %s: %w", ref, err)
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	base, err := migration.New(fsys, ".")
	if errors.Is(err, migration.ErrDirectory) && len(fsys) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("-git-base %s: the migration directory at %s: %w", ref, ref, err)
	}
	return base, nil
}

// gitForkPoint returns the commit at which the branch checked out in the
// repository holding the directory lint checks left ref (git merge-base
// ref HEAD), when it is not ref's own commit: a file ref gained after it
// has not reached the branch yet, which is no removal of the branch's.
// It returns "" when the fork point is ref itself, or when git cannot
// tell (no HEAD, a shallow clone): ref then stands for it.
func gitForkPoint(ctx context.Context, env *cmdEnv, ref string) string {
	dir, err := repoPath("-dir DIR", env.dir, "schema/migrations")
	if err != nil {
		return ""
	}
	fork, err := gitIn(ctx, dir, "merge-base", ref, "HEAD")
	if err != nil {
		return ""
	}
	commit, err := gitIn(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil || bytes.Equal(bytes.TrimSpace(fork), bytes.TrimSpace(commit)) {
		return ""
	}
	return string(bytes.TrimSpace(fork))
}

// gitIn runs git with args in the repository holding dir and returns its
// standard output, or an error carrying its standard error.
func gitIn(ctx context.Context, dir string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return stdout.Bytes(), nil
}
