package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/schema"
)

// newStatusDoc returns status's document for database db, before
// anything is read.
func newStatusDoc(db string) *statusDoc {
	return &statusDoc{docHeader: docHeader{Command: "status", DB: db}, Pending: []string{}, OutOfOrder: []string{}}
}

// statusDoc is status's JSON document.
type statusDoc struct {
	docHeader        // command "status"
	Current   string `json:"current"` // "" for an empty database; a newer one's newest version
	// Pending lists the versions up would apply, oldest first.
	Pending []string `json:"pending"`
	// OutOfOrder lists the files at or below current that the history
	// does not hold: up refuses to run.
	OutOfOrder []string `json:"out_of_order"`
}

// cmdStatus prints where the database stands. Pending and out-of-order
// migrations are findings (exit 1).
func cmdStatus(ctx context.Context, env *cmdEnv) error {
	doc := newStatusDoc(env.db)
	env.doc = doc
	_, _, st, err := readTarget(ctx, env, func(m *migration.Migrator, conn *sql.DB) (migration.Status, error) {
		return m.Status(ctx, conn)
	})
	if errors.Is(err, schema.ErrNewerDatabase) {
		doc.Current = st.Current // the version it found, newer than this build's
	}
	if err != nil {
		return err
	}
	doc.Current, doc.Pending, doc.OutOfOrder = st.Current, nonNil(st.Pending), nonNil(st.OutOfOrder)
	if !env.json {
		writeStatus(env.stdout, st)
	}
	if err := outOfOrder(st); err != nil {
		return err
	}
	return pending(st.Pending)
}

// pending returns the finding of versions up would apply, nil if there is
// none.
func pending(versions []string) error {
	if len(versions) == 0 {
		return nil
	}
	return findingf("%d version(s) pending (%s): run up", len(versions), strings.Join(versions, " "))
}

// outOfOrder returns the finding of the files added below the database's
// version (schema.ErrOutOfOrder), nil if there is none.
func outOfOrder(st migration.Status) error {
	if len(st.OutOfOrder) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s at or below version %s, not in its history: up refuses to run; give it a version above %s",
		schema.ErrOutOfOrder, strings.Join(st.OutOfOrder, ", "), st.Current, st.Current)
}

func writeStatus(w io.Writer, st migration.Status) {
	current, pending := st.Current, "none"
	if current == "" {
		current = "none (empty database)"
	}
	if len(st.Pending) > 0 {
		pending = strings.Join(st.Pending, " ")
	}
	fmt.Fprintf(w, "current: %s\npending: %s\n", escapeText(current), escapeText(pending))
	if len(st.OutOfOrder) > 0 {
		fmt.Fprintf(w, "out of order: %s (at or below the current version, not in its history: up refuses to run)\n", escapeText(strings.Join(st.OutOfOrder, " ")))
	}
}
