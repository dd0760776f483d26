package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/securemsg/storage/migration"
	"github.com/securemsg/storage/migration/pipeline"
)

// frozenBaseline is the newest version whose findings are informational.
const frozenBaseline = pipeline.LintBaseline

func cmdLint(ctx context.Context, env *cmdEnv) error {
	var (
		m   *migration.Migrator
		err error
	)
	if env.dir == "" {
		m, err = migration.Default()
	} else {
		if err := checkDir(env.dir); err != nil {
			return err
		}
		m, err = migration.New(os.DirFS(env.dir), ".")
	}
	if err != nil {
		return err
	}
	if !env.json {
		return lintDir(ctx, m, env.stdout)
	}
	r, err := pipeline.Lint(ctx, m)
	if err != nil {
		return err
	}
	doc := lintDoc{Command: "lint", Files: r.Files, Baseline: frozenBaseline, Blocking: r.Blocking(), Findings: nonNil(r.Findings)}
	doc.OK = doc.Blocking == 0
	if err := env.emit(doc); err != nil {
		return err
	}
	if !doc.OK {
		return fmt.Errorf("%d finding(s) in versions above %s", doc.Blocking, frozenBaseline)
	}
	return nil
}

// lintDoc is lint's JSON document.
type lintDoc struct {
	Command string `json:"command"` // "lint"
	// OK is false when a finding is in a version above Baseline.
	OK       bool               `json:"ok"`
	Files    int                `json:"files"`
	Baseline string             `json:"baseline"` // findings at or below it are informational
	Blocking int                `json:"blocking"`
	Findings []pipeline.Finding `json:"findings"`
}

// checkDir says plainly when a -dir flag names no directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: directory does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// lintDir lints the directory of m (pipeline.Lint), prints every finding
// to w, one a line, and returns an error if a finding is in a version
// above the frozen baseline.
func lintDir(ctx context.Context, m *migration.Migrator, w io.Writer) error {
	r, err := pipeline.Lint(ctx, m)
	if err != nil {
		return err
	}
	for _, f := range r.Findings {
		fmt.Fprintln(w, f)
	}
	blocking := r.Blocking()
	fmt.Fprintf(w, "lint: %d file(s), %d finding(s), %d above version %s\n", r.Files, len(r.Findings), blocking, frozenBaseline)
	if blocking > 0 {
		return fmt.Errorf("%d finding(s) in versions above %s", blocking, frozenBaseline)
	}
	return nil
}
