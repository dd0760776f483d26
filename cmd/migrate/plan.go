package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/schema"
)

// newPlanDoc returns plan's document for database db, before anything is
// read.
func newPlanDoc(db string) *planDoc {
	return &planDoc{docHeader: docHeader{Command: "plan", DB: db}, Versions: []planVersion{}, OutOfOrder: []string{},
		verifyFields: verifyFields{Differences: []pipeline.Difference{}, History: []pipeline.HistoryDrift{}}}
}

// planDoc is plan's JSON document.
type planDoc struct {
	docHeader // command "plan"
	// Exists is false for a missing file, planned as an empty database.
	Exists bool `json:"exists"`
	verifyFields
	Current string `json:"current"`
	// Versions is what up would run, in order, in one transaction.
	Versions []planVersion `json:"versions"`
	// OutOfOrder lists the files at or below current that the history
	// does not hold: up refuses to run, Versions is empty.
	OutOfOrder []string `json:"out_of_order"`
}

type planVersion struct {
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Statements  []string `json:"statements"`
}

// cmdPlan prints what up would run. Pending and out-of-order migrations
// are findings (exit 1).
func cmdPlan(ctx context.Context, env *cmdEnv) (err error) {
	doc := newPlanDoc(env.db)
	env.doc = doc
	defer func() { doc.report(env.text(), err, &doc.Current) }()
	path, m, err := env.target()
	if err != nil {
		return err
	}
	var (
		st   migration.Status
		plan []migration.PendingFile
	)
	// Status and Plan read in two transactions: ReadStable makes sure no
	// writer came between them.
	read := func(conn *sql.DB) (err error) {
		// What up checks first, so that plan agrees with it.
		if err := verifyBeforeUp(ctx, env, m, conn, path); err != nil {
			st.Current = newerCurrent(ctx, m, conn, err)
			return err
		}
		if st, err = m.Status(ctx, conn); err != nil || len(st.OutOfOrder) > 0 {
			return err
		}
		plan, err = m.Plan(ctx, conn)
		return err
	}
	_, statErr := os.Stat(path)
	missing := errors.Is(statErr, fs.ErrNotExist)
	doc.Exists = !missing
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		// up refuses a symbolic link to nothing: so does its plan.
		if err := danglingLink(path); err != nil {
			return err
		}
		// Plan against an empty in-memory database; create nothing. read's
		// error goes to the named result the deferred report reads, so
		// this block declares no err of its own.
		conn, oerr := pipeline.OpenMemory(ctx)
		if oerr != nil {
			return oerr
		}
		defer conn.Close()
		err = read(conn)
	case statErr != nil:
		return statErr
	default:
		err = env.readExisting(ctx, path, read)
	}
	if errors.Is(err, schema.ErrNewerDatabase) {
		doc.Current = st.Current // the version it found, newer than this build's
	}
	if err != nil {
		return err
	}
	doc.Current, doc.OutOfOrder = st.Current, nonNil(st.OutOfOrder)
	var versions []string
	for _, f := range plan {
		doc.Versions = append(doc.Versions, planVersion{Version: f.Version, Description: f.Description, Statements: nonNil(f.Statements)})
		versions = append(versions, f.Version)
	}
	if env.json {
		if err := outOfOrder(st); err != nil {
			return err
		}
		return pending(versions)
	}
	if missing {
		fmt.Fprintf(env.stdout, "-- %s does not exist: planned as an empty database\n", path)
	}
	current := escapeText(st.Current)
	if current == "" {
		current = "none"
	}
	if len(st.OutOfOrder) > 0 {
		fmt.Fprintf(env.stdout, "-- current version %s, head %s: up refuses to run: %s at or below the current version, not in its history\n",
			current, m.Head(), strings.Join(st.OutOfOrder, " "))
		return outOfOrder(st)
	}
	if len(plan) == 0 {
		fmt.Fprintf(env.stdout, "-- current version %s, head %s: nothing to apply\n", current, m.Head())
		return nil
	}

	fmt.Fprintf(env.stdout, "-- current version %s, head %s: %d version(s) to apply, in one transaction\n",
		current, m.Head(), len(plan))
	for _, f := range plan {
		n := "statements"
		if len(f.Statements) == 1 {
			n = "statement"
		}
		fmt.Fprintf(env.stdout, "\n-- version %s: %s (%d %s)\n", escapeText(f.Version), escapeText(f.Description), len(f.Statements), n)
		for _, s := range f.Statements {
			s = strings.TrimSpace(s)
			if !strings.HasSuffix(s, ";") {
				s += ";"
			}
			fmt.Fprintln(env.stdout, escapeStatement(s))
		}
	}
	return pending(versions)
}
