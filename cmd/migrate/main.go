// Command migrate is what a pipeline (and a developer) runs against the
// client database's schema history: it applies the embedded migration
// directory (package schema, verified against its atlas.sum), reports where
// a database stands, shows what would run, lints the directory with Atlas's
// analyzers and re-hashes the directory after a migration is added.
//
// Usage:
//
//	migrate up -db FILE       create FILE if absent and migrate it to head
//	migrate status -db FILE   print the current and pending versions
//	migrate plan -db FILE     print the statements up would run
//	migrate lint [-dir DIR]   run Atlas's analyzers over the directory
//	migrate hash [-dir DIR]   recompute DIR/atlas.sum (like atlas migrate hash)
//	migrate fixture-test      migrate a temporary copy of the frozen v14
//	                          fixture to head and prove nothing was lost
//
// status and plan never create or change the database. A failing command
// prints one line, "migrate: reason", on stderr, exits 1 and leaves the
// database as it found it. A usage error (no or unknown command, unknown
// flag, missing -db) prints the usage on stderr and exits 2.
//
// up, status and plan use the migration directory embedded in the binary:
// a database is migrated with exactly the files the binary was built with.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"ariga.io/atlas/sql/migrate"
	_ "github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/migration"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand.
type command struct {
	name    string
	args    string // argument synopsis for the usage text
	summary string
	// run executes the command with its own FlagSet already parsed.
	run func(ctx context.Context, env *cmdEnv) error
	// flags declares the command's flags on fs.
	flags func(fs *flag.FlagSet, env *cmdEnv)
}

// cmdEnv carries a command's parsed flags and its output streams.
type cmdEnv struct {
	stdout, stderr io.Writer
	db             string // -db
	dir            string // -dir
}

// commands lists the subcommands in usage order.
var commands = []*command{
	{
		name: "up", args: "-db FILE", summary: "create FILE if absent and migrate it to head",
		flags: dbFlag("database `FILE`, created if absent"), run: cmdUp,
	},
	{
		name: "status", args: "-db FILE", summary: "print the current and pending versions (read only)",
		flags: dbFlag("existing database `FILE`"), run: cmdStatus,
	},
	{
		name: "plan", args: "-db FILE", summary: "print the statements up would run (read only; a missing FILE is planned as empty)",
		flags: dbFlag("database `FILE`; a missing file is planned as an empty database and not created"), run: cmdPlan,
	},
	{
		name: "lint", args: "[-dir DIR]", summary: "run Atlas's destructive, data-dependent and backward-incompatible analyzers",
		flags: func(fs *flag.FlagSet, env *cmdEnv) {
			fs.StringVar(&env.dir, "dir", "", "migration `DIR` to lint (default: the directory embedded in this binary)")
		},
		run: cmdLint,
	},
	{
		name: "hash", args: "[-dir DIR]", summary: "recompute DIR/atlas.sum from the files on disk",
		flags: func(fs *flag.FlagSet, env *cmdEnv) {
			fs.StringVar(&env.dir, "dir", "schema/migrations", "migration `DIR`")
		},
		run: cmdHash,
	},
	{
		// version14.Prove works on its own temporary copy of the fixture,
		// never on the frozen files.
		name: "fixture-test", summary: "migrate a temporary copy of the frozen v14 fixture to head and check it",
		run: func(ctx context.Context, env *cmdEnv) error { return version14.Prove(ctx, env.stdout) },
	},
}

func dbFlag(usage string) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) { fs.StringVar(&env.db, "db", "", usage) }
}

// usageError is a command-line mistake: reported with the usage, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "migrate: no command")
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage(stdout)
		return exitOK
	}
	var cmd *command
	for _, c := range commands {
		if c.name == name {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "migrate: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}

	env := &cmdEnv{stdout: stdout, stderr: stderr}
	fset := flag.NewFlagSet("migrate "+cmd.name, flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "usage: migrate %s %s\n\n%s.\n\n", cmd.name, cmd.args, cmd.summary)
		fset.PrintDefaults()
	}
	if cmd.flags != nil {
		cmd.flags(fset, env)
	}
	if err := fset.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		// flag has already printed the error and the usage.
		return exitUsage
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "migrate %s: unexpected argument %q\n", cmd.name, fset.Arg(0))
		fset.Usage()
		return exitUsage
	}

	err := cmd.run(context.Background(), env)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "migrate %s: %s\n", cmd.name, ue.msg)
		fset.Usage()
		return exitUsage
	default:
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cmd.name, oneLine(describe(err)))
		return exitFailure
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: migrate <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %-11s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `run "migrate <command> -h" for a command's flags`)
}

// describe returns err's message, naming the file Atlas found at fault
// when atlas.sum does not match.
func describe(err error) string {
	var ce *migrate.ChecksumError
	if errors.As(err, &ce) && ce.File != "" {
		return fmt.Sprintf("%s (%s %s since atlas.sum was computed)", err, ce.File, ce.Reason)
	}
	return err.Error()
}

// oneLine folds an error message (SQL in it may span lines) onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// requireDB returns the -db flag or a usage error.
func (env *cmdEnv) requireDB() (string, error) {
	if env.db == "" {
		return "", &usageError{msg: "-db is required"}
	}
	return env.db, nil
}

// fileDSN returns the DSN of the database file at path: the client's own
// (immediate write transactions, busy timeout, foreign keys), creating the
// file if absent when create is set. Without create, the connection is
// also query-only: SQLite refuses any write on it. The journal mode is left
// as the file has it; up switches a database to WAL once it has migrated.
//
// (Query-only rather than mode=ro: a read-only connection cannot remove
// the -wal and -shm files of a WAL database when it closes, and would
// leave them behind.)
func fileDSN(path string, create bool) string {
	// path is a URI filename: escape what SQLite would read as URI syntax.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if create {
		return "file:" + esc + "?mode=rwc&_txlock=immediate&_busy_timeout=5000&_foreign_keys=on"
	}
	return "file:" + esc + "?mode=rw&_query_only=true&_txlock=deferred&_busy_timeout=5000&_foreign_keys=on"
}

// openExisting opens the database at path query-only; it fails rather than
// create a missing file.
func openExisting(path string) (*sql.DB, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such database file", path)
		}
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a database file", path)
	}
	conn, err := sql.Open("sqlite3", fileDSN(path, false))
	if err != nil {
		return nil, err
	}
	if err := conn.Ping(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return conn, nil
}

func cmdUp(ctx context.Context, env *cmdEnv) (err error) {
	path, err := env.requireDB()
	if err != nil {
		return err
	}
	m, err := migration.Default()
	if err != nil {
		return err
	}
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory, not a database file", path)
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return statErr
	}
	created := statErr != nil

	conn, err := sql.Open("sqlite3", fileDSN(path, true))
	if err != nil {
		return err
	}
	defer func() {
		cerr := conn.Close()
		if err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
		if err != nil && created {
			// The file did not exist before: leave none behind.
			for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
		}
	}()

	applied, err := m.Up(ctx, conn)
	if err != nil {
		return err
	}
	// The client runs its database in WAL mode. Set only now, so that a
	// refused database is left exactly as it was found.
	if _, err := conn.ExecContext(ctx, "PRAGMA journal_mode = WAL"); err != nil {
		return fmt.Errorf("set WAL journal mode: %w", err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(env.stdout, "already at version %s\n", m.Head())
		return nil
	}
	fmt.Fprintf(env.stdout, "applied: %s\n", strings.Join(applied, " "))
	fmt.Fprintf(env.stdout, "now at version %s\n", m.Head())
	return nil
}

func cmdStatus(ctx context.Context, env *cmdEnv) error {
	path, err := env.requireDB()
	if err != nil {
		return err
	}
	m, err := migration.Default()
	if err != nil {
		return err
	}
	conn, err := openExisting(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := m.Status(ctx, conn)
	if err != nil {
		return err
	}
	writeStatus(env.stdout, st)
	return nil
}

func writeStatus(w io.Writer, st migration.Status) {
	current, pending := st.Current, "none"
	if current == "" {
		current = "none (empty database)"
	}
	if len(st.Pending) > 0 {
		pending = strings.Join(st.Pending, " ")
	}
	fmt.Fprintf(w, "current: %s\npending: %s\n", current, pending)
}

func cmdPlan(ctx context.Context, env *cmdEnv) error {
	path, err := env.requireDB()
	if err != nil {
		return err
	}
	m, err := migration.Default()
	if err != nil {
		return err
	}
	var conn *sql.DB
	_, statErr := os.Stat(path)
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		// Plan against an empty in-memory database; create nothing.
		conn, err = sql.Open("sqlite3", ":memory:")
		if err != nil {
			return err
		}
		conn.SetMaxOpenConns(1)
		fmt.Fprintf(env.stdout, "-- %s does not exist: planned as an empty database\n", path)
	case statErr != nil:
		return statErr
	default:
		if conn, err = openExisting(path); err != nil {
			return err
		}
	}
	defer conn.Close()

	st, err := m.Status(ctx, conn)
	if err != nil {
		return err
	}
	plan, err := m.Plan(ctx, conn)
	if err != nil {
		return err
	}
	current := st.Current
	if current == "" {
		current = "none"
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
		fmt.Fprintf(env.stdout, "\n-- version %s: %s (%d %s)\n", f.Version, f.Description, len(f.Statements), n)
		for _, s := range f.Statements {
			s = strings.TrimSpace(s)
			if !strings.HasSuffix(s, ";") {
				s += ";"
			}
			fmt.Fprintln(env.stdout, s)
		}
	}
	return nil
}
