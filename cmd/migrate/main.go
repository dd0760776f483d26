// Command migrate is what a pipeline (and a developer) runs against the
// client database's schema history: it applies the embedded migration
// directory (package schema, verified against its atlas.sum), reports where
// a database stands and how it drifted from head, shows what would run,
// lints the directory with Atlas's analyzers, proves every frozen fixture,
// and regenerates the reviewable artifacts (query plans, schema reference,
// atlas.sum).
//
// Usage:
//
//	migrate up -db FILE [-dir DIR] [-lock-timeout D] [-json]
//	                                           create FILE if absent and migrate it to head
//	migrate status -db FILE [-dir DIR] [-json] print the current and pending versions
//	migrate plan -db FILE [-dir DIR] [-json]   print the statements up would run
//	migrate drift -db FILE [-dir DIR] [-json | -format F]
//	                                           print FILE's schema and history drift from head
//	migrate lint [-dir DIR] [-db FILE] [-git-base REF] [-json | -format F]
//	                                           run Atlas's analyzers over the directory
//	migrate fixture-test [-dir DIR] [-fixtures DIR] [-json | -format F]
//	                                           migrate a temporary copy of every frozen
//	                                           fixtures/versionNN to head and check it
//	migrate plans [-dir DIR] [-out FILE] [-json]
//	                                           write queries/PLANS.md (EXPLAIN QUERY PLAN)
//	migrate schema-doc [-dir DIR] [-out FILE] [-json]
//	                                           write schema/SCHEMA.md (Atlas inspection)
//	migrate hash [-dir DIR] [-json]            recompute DIR/atlas.sum (like atlas migrate hash)
//	migrate freeze [-db FILE] [-dir DIR] [-fixtures DIR] [-out DIR] [-json]
//	                                           write fixtures/version<head>: the newest
//	                                           fixture migrated to head, or a head database
//
// -json writes one JSON document on stdout (shapes in the README's "In a
// pipeline"). -format github or gcc makes lint, drift and fixture-test
// print each finding as a GitHub Actions workflow command
// (::error file=F,line=L,col=C::msg) or a compiler line
// (F:L:C: error: msg), paths relative to the repository root.
//
// status, plan, drift and lint -db open the database read-only and never
// change it or create anything beside it: they work beside an application
// that has the database open. up writes, so it takes the database's writer
// lock (the file FILE-lock, which an open store holds, waiting up to
// -lock-timeout for it) and refuses a database another up or an
// application holds, unless there is nothing to apply (it removes
// FILE-lock again if it created it).
//
// Exit codes, one convention on every command (like diff's):
//
//	0  clean: at head, no drift, no finding
//	1  a finding: drift, pending or out-of-order migrations, lint
//	   findings, a failed fixture check
//	2  an error: usage, a missing or unreadable file, not a database, a
//	   database it cannot place or that needs recovery, a database an
//	   application has open (up)
//
// A non-zero exit prints one line, "migrate: command: reason", on stderr
// and leaves the database as it found it; with -json the document keeps
// every field of a success and adds "error".
//
// Every command but hash reads the migration directory embedded in the
// binary (a database is migrated with exactly the files the binary was
// built with), or the one -dir names. Each run says which, and its head:
// first on stderr in text ("migrate: migrations embedded, head 15"), as
// "migrations" and "head" in its JSON document; run inside a checkout
// whose schema/migrations differs from the embedded copy, it warns on
// stderr. hash, and the default outputs of plans, schema-doc, freeze and
// fixture-test's fixtures, are the repository's files, found from any
// directory of the checkout.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ariga.io/atlas/sql/migrate"
	"github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/internal/migration"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit codes, one convention on every command (as diff's): 0 clean, 1 a
// finding, 2 an error.
const (
	// exitOK: the command did what it was asked and found nothing.
	exitOK = 0
	// exitFinding: the command ran and found something a pipeline must
	// act on: drift, pending or out-of-order migrations, lint findings,
	// a failed fixture check, or up refusing a database whose schema is
	// not what its history says.
	exitFinding = 1
	// exitError: the command could not do its work: a usage error, a
	// missing or unreadable file, a file that is not a database, a
	// database it cannot place or that needs recovery, a damaged
	// migration directory.
	exitError = 2
)

// finding is an error that is a finding (exit 1): the command ran to its
// end and reports what it found.
type finding struct{ msg string }

func (f *finding) Error() string { return f.msg }

// findingf returns a finding with a formatted message.
func findingf(format string, args ...any) error {
	return &finding{msg: fmt.Sprintf(format, args...)}
}

// isFinding reports whether err is a finding rather than an error.
func isFinding(err error) bool {
	var f *finding
	return errors.As(err, &f) || errors.Is(err, migration.ErrOutOfOrder)
}

// command is one subcommand.
type command struct {
	name    string
	args    string // argument synopsis for the usage text
	summary string
	// run executes the command with its own FlagSet already parsed.
	run func(ctx context.Context, env *cmdEnv) error
	// flags declares the command's flags on fs.
	flags func(fs *flag.FlagSet, env *cmdEnv)
	// doc returns the command's JSON document for the -db value given,
	// as it is before anything is read: what a usage error under -json
	// writes.
	doc func(db string) jsonDoc
}

// docOf adapts a document constructor to command.doc.
func docOf[T jsonDoc](f func(string) T) func(string) jsonDoc {
	return func(db string) jsonDoc { return f(db) }
}

// cmdEnv carries a command's parsed flags and its output streams.
type cmdEnv struct {
	stdout, stderr io.Writer
	db             string        // -db
	dir            string        // -dir
	out            string        // -out
	fixtures       string        // -fixtures
	json           bool          // -json
	format         string        // -format (lint, drift, fixture-test)
	lockTimeout    time.Duration // -lock-timeout
	gitBase        string        // -git-base
	// doc is the command's JSON document with -json, set as soon as the
	// command starts and filled as it goes: written once it returns, so
	// that a failure is reported with the fields a success has.
	doc jsonDoc
	// readStable reads a database file read-only: pipeline.ReadStable,
	// replaced by tests that commit a write between the open and the read.
	readStable func(ctx context.Context, path string, read func(*sql.DB) error) error
	// embedded returns the Migrator of the directory embedded in the
	// binary: migration.Default, replaced by tests that add a migration.
	embedded func() (*migration.Migrator, error)
}

// emit writes v as the command's one JSON document on stdout.
func (env *cmdEnv) emit(v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // SQL reads better with its < and > as they are
	return enc.Encode(v)
}

// docHeader is what every command's JSON document holds, on success and
// on failure alike.
type docHeader struct {
	Command string `json:"command"`
	// Migrations is the migration directory read: "embedded" or the -dir
	// path ("" if the command failed before reading one).
	Migrations string `json:"migrations"`
	DB         string `json:"db,omitempty"` // the -db file
	Head       string `json:"head"`         // "" if the migration directory is unreadable
	// OK is true when the command exits 0: no finding, no error.
	OK bool `json:"ok"`
	// Error is the one line printed on stderr, "" when the command exits 0.
	Error string `json:"error,omitempty"`
}

func (h *docHeader) header() *docHeader { return h }

// jsonDoc is a command's JSON document.
type jsonDoc interface{ header() *docHeader }

// errorDoc is the JSON document of a command without a document of its
// own that failed.
type errorDoc = docHeader

// commands lists the subcommands in usage order.
var commands = []*command{
	{
		name: "up", args: "-db FILE [-dir DIR] [-lock-timeout D] [-json]", summary: "create FILE if absent and migrate it to head, after checking it is what its history says",
		flags: withJSON(withDir(func(fs *flag.FlagSet, env *cmdEnv) {
			dbFlag("database `FILE`, created if absent")(fs, env)
			fs.DurationVar(&env.lockTimeout, "lock-timeout", 0, "wait up to `D` (such as 30s) for another up or an application to release FILE's writer lock (default: do not wait)")
		})), run: cmdUp, doc: docOf(newUpDoc),
	},
	{
		name: "status", args: "-db FILE [-dir DIR] [-json]", summary: "print the current and pending versions (read only)",
		flags: withJSON(withDir(dbFlag("existing database `FILE`"))), run: cmdStatus, doc: docOf(newStatusDoc),
	},
	{
		name: "plan", args: "-db FILE [-dir DIR] [-json]", summary: "print the statements up would run (read only; a missing FILE is planned as empty)",
		flags: withJSON(withDir(dbFlag("database `FILE`; a missing file is planned as an empty database and not created"))), run: cmdPlan, doc: docOf(newPlanDoc),
	},
	{
		name: "drift", args: "-db FILE [-dir DIR] [-json | -format F]", summary: "compare FILE's schema and history with head (read only); exit 1 on drift",
		flags: withFormat(withJSON(withDir(dbFlag("existing database `FILE`")))), run: cmdDrift, doc: docOf(newDriftDoc),
	},
	{
		name: "lint", args: "[-dir DIR] [-db FILE] [-git-base REF] [-json | -format F]", summary: "run Atlas's destructive, data-dependent and backward-incompatible analyzers",
		flags: withFormat(withJSON(func(fs *flag.FlagSet, env *cmdEnv) {
			dirFlag(fs, env)
			fs.StringVar(&env.db, "db", "", "also check the directory against the history of database `FILE` (read only): a file added below its version is a finding")
			fs.StringVar(&env.gitBase, "git-base", "", "check the directory against the migration directory as git `REF` (such as origin/main) has it, instead of the one this binary embeds: a file added below REF's highest version is a finding")
		})),
		run: cmdLint, doc: docOf(newLintDoc),
	},
	{
		name: "plans", args: "[-dir DIR] [-out FILE] [-json]", summary: "write every sqlc query's EXPLAIN QUERY PLAN at head (" + plansPath + ")",
		flags: withJSON(withDir(outFlag(plansPath))), run: cmdPlans, doc: docOf(newGeneratedDoc("plans")),
	},
	{
		name: "schema-doc", args: "[-dir DIR] [-out FILE] [-json]", summary: "write the schema reference (" + schemaDocPath + ") from Atlas's inspection of head",
		flags: withJSON(withDir(outFlag(schemaDocPath))), run: cmdSchemaDoc, doc: docOf(newGeneratedDoc("schema-doc")),
	},
	{
		name: "hash", args: "[-dir DIR] [-json]", summary: "recompute DIR/atlas.sum from the files on disk",
		flags: withJSON(func(fs *flag.FlagSet, env *cmdEnv) {
			fs.StringVar(&env.dir, "dir", "", "migration `DIR` (default: schema/migrations in the repository, from any directory of it)")
		}),
		run: cmdHash, doc: docOf(newHashDoc),
	},
	{
		name: "fixture-test", args: "[-dir DIR] [-fixtures DIR] [-json | -format F]", summary: "migrate a temporary copy of every frozen fixtures/versionNN to head and check it",
		flags: withFormat(withJSON(func(fs *flag.FlagSet, env *cmdEnv) {
			dirFlag(fs, env)
			fs.StringVar(&env.fixtures, "fixtures", "", "`DIR` holding the versionNN fixture directories (default: fixtures in the repository)")
		})),
		run: cmdFixtureTest, doc: docOf(newFixtureTestDoc),
	},
	{
		name: "freeze", args: "[-db FILE] [-dir DIR] [-fixtures DIR] [-out DIR]", summary: "write the fixture of head: the newest fixture migrated to head once it passes fixture-test, or -db FILE",
		flags: withJSON(func(fs *flag.FlagSet, env *cmdEnv) {
			dirFlag(fs, env)
			fs.StringVar(&env.db, "db", "", "freeze this head database `FILE`, sealed with the fixture test key (read, never changed), instead of the newest fixture migrated to head")
			fs.StringVar(&env.fixtures, "fixtures", "", "`DIR` holding the versionNN fixture directories (default: fixtures in the repository)")
			fs.StringVar(&env.out, "out", "", "new fixture `DIR`, named version<head> (default: version<head> in the fixtures directory; never overwritten)")
		}),
		run: cmdFreeze, doc: docOf(newFreezeDoc),
	},
}

func dbFlag(usage string) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) { fs.StringVar(&env.db, "db", "", usage) }
}

func outFlag(def string) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) {
		fs.StringVar(&env.out, "out", "", "output `FILE` (default: "+def+" in the repository)")
	}
}

// withDir adds -dir (dirFlag) to a command's flags.
func withDir(flags func(*flag.FlagSet, *cmdEnv)) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) {
		flags(fs, env)
		dirFlag(fs, env)
	}
}

// withJSON adds -json to a command's flags.
func withJSON(flags func(*flag.FlagSet, *cmdEnv)) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) {
		if flags != nil {
			flags(fs, env)
		}
		fs.BoolVar(&env.json, "json", false, "write one JSON document on stdout instead of text (shape: see README)")
	}
}

// usageError is a command-line mistake: reported with the usage, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(args, &cmdEnv{stdout: stdout, stderr: stderr})
}

// runEnv is run in env, whose writers, reader and directory the command
// uses (pipeline.ReadStable and migration.Default where env has none).
func runEnv(args []string, env *cmdEnv) int {
	if env.readStable == nil {
		env.readStable = pipeline.ReadStable
	}
	if env.embedded == nil {
		env.embedded = migration.Default
	}
	stdout, stderr := env.stdout, env.stderr
	// A usage error under -json writes a document too: the command's own,
	// as it is before anything is read, with the error.
	wantsJSON := slices.ContainsFunc(args, isJSONFlag)
	usageDoc := func(doc jsonDoc, msg string) int {
		if wantsJSON || env.json {
			h := doc.header()
			h.OK, h.Error = false, msg
			env.emit(doc)
		}
		return exitError
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "migrate: no command")
		usage(stderr)
		return exitError
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
		return usageDoc(&errorDoc{Command: name}, fmt.Sprintf("unknown command %q", name))
	}

	fset := flag.NewFlagSet("migrate "+cmd.name, flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "usage: migrate %s %s\n\n%s.\n\n", cmd.name, cmd.args, cmd.summary)
		fset.PrintDefaults()
		fmt.Fprintf(fset.Output(), "\n%s", exitCodes)
	}
	if cmd.flags != nil {
		cmd.flags(fset, env)
	}
	if err := fset.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		// flag has already printed the error and the usage.
		return usageDoc(cmd.doc(env.db), err.Error())
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "migrate %s: unexpected argument %q\n", cmd.name, fset.Arg(0))
		fset.Usage()
		return usageDoc(cmd.doc(env.db), fmt.Sprintf("unexpected argument %q", fset.Arg(0)))
	}

	err := cmd.run(context.Background(), env)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "migrate %s: %s\n", cmd.name, ue.msg)
		fset.Usage()
		doc := env.doc
		if doc == nil {
			doc = cmd.doc(env.db)
		}
		return usageDoc(doc, ue.msg)
	}
	if env.json {
		// One document, success or not, with the same fields.
		doc := env.doc
		if doc == nil {
			doc = &errorDoc{Command: cmd.name}
		}
		h := doc.header()
		h.OK = err == nil
		if err != nil {
			h.Error = oneLine(describe(err))
		}
		if eerr := env.emit(doc); eerr != nil && err == nil {
			err = eerr
		}
	}
	switch {
	case err == nil:
		return exitOK
	case isFinding(err):
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cmd.name, oneLine(describe(err)))
		return exitFinding
	default:
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cmd.name, oneLine(describe(err)))
		return exitError
	}
}

// isJSONFlag reports whether a command-line argument sets -json (also
// --json and -json=true), before the flags are parsed.
func isJSONFlag(arg string) bool {
	name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
	if !strings.HasPrefix(arg, "-") || name != "json" {
		return false
	}
	if !hasValue {
		return true
	}
	b, err := strconv.ParseBool(value)
	return err == nil && b
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: migrate <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %-11s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, exitCodes)
	fmt.Fprintln(w)
	fmt.Fprintln(w, `run "migrate <command> -h" for a command's flags`)
}

// exitCodes is the exit-code convention, as -h prints it.
const exitCodes = `exit codes (every command):
  0  clean: at head, no drift, no finding
  1  a finding: drift, pending or out-of-order migrations, lint findings,
     a failed fixture check
  2  an error: usage, a missing or unreadable file, not a database, a
     database it cannot place or that needs recovery
`

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
	switch {
	case env.db == "":
		return "", &usageError{msg: "-db is required"}
	case env.db == ":memory:" || strings.HasPrefix(env.db, "file:"):
		// SQLite would read these as its in-memory database or a URI,
		// not as the file a pipeline means to check.
		return "", &usageError{msg: fmt.Sprintf("-db %s is not a database file: give the file's path", env.db)}
	}
	return env.db, nil
}

// text is where a command writes its text report: stdout, or nowhere
// with -json (the JSON document is the report).
func (env *cmdEnv) text() io.Writer {
	if env.json || env.annotating() {
		return io.Discard
	}
	return env.stdout
}

// danglingLink returns an error naming path and its target when path is a
// symbolic link to nothing, nil otherwise.
func danglingLink(path string) error {
	li, err := os.Lstat(path)
	if err != nil || li.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	target, _ := os.Readlink(path)
	return fmt.Errorf("%s is a symbolic link to %s, which does not exist: nothing created", path, target)
}

// target returns what a command on one database starts from: the -db
// path (a usage error without it) and the migration directory embedded in
// the binary (an error wrapping migration.ErrChecksum or
// migration.ErrDirectory if it is damaged).
func (env *cmdEnv) target() (string, *migration.Migrator, error) {
	path, err := env.requireDB()
	if err != nil {
		return "", nil, err
	}
	m, err := env.migrations()
	if err != nil {
		return "", nil, err
	}
	return path, m, nil
}

// readTarget runs read on the target database (target), read read-only
// (readExisting): it fails on a missing file or one that is not a SQLite
// database. read may run more than once (pipeline.ReadStable) and must
// only read; what it returns on the last, stable run is returned.
func readTarget[T any](ctx context.Context, env *cmdEnv, read func(m *migration.Migrator, conn *sql.DB) (T, error)) (path string, m *migration.Migrator, v T, err error) {
	path, m, err = env.target()
	if err != nil {
		return "", nil, v, err
	}
	err = env.readExisting(ctx, path, func(conn *sql.DB) error {
		var rerr error
		v, rerr = read(m, conn)
		return rerr
	})
	return path, m, v, err
}

// createDSN returns the client's own DSN for the database file at path
// (immediate write transactions, busy timeout, foreign keys), creating the
// file if absent; the journal mode is left as the file has it (up switches
// a database to WAL once it has migrated). Read-only commands use
// pipeline.ReadStable instead.
func createDSN(path string) string {
	return "file:" + migration.URIPath(path) + "?mode=rwc&_txlock=immediate&_busy_timeout=5000&_foreign_keys=on"
}

// readExisting runs read on the database at path, opened read-only
// (pipeline.ReadStable: read runs again if the file changed meanwhile,
// and the command fails with pipeline.ErrChanged if it keeps changing).
// It fails rather than create a missing file, and says so when the file is
// not a SQLite database.
func (env *cmdEnv) readExisting(ctx context.Context, path string, read func(*sql.DB) error) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := danglingLink(path); err != nil {
				return err
			}
			return fmt.Errorf("%s: no such database file", path)
		}
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a database file", path)
	}
	// Read permission, checked by the OS rather than guessed from the mode.
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	f.Close()
	return env.readStable(ctx, path, func(conn *sql.DB) error {
		if err := checkDatabase(conn, path); err != nil {
			return err
		}
		return read(conn)
	})
}

// checkDatabase reads the schema cookie, which fails on a file that is not
// a SQLite database.
func checkDatabase(conn *sql.DB, path string) error {
	var v int64
	if err := conn.QueryRow("PRAGMA schema_version").Scan(&v); err != nil {
		return explainOpen(path, err)
	}
	return nil
}

// explainOpen says in plain words why SQLite refused path.
func explainOpen(path string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.ExtendedCode == sqlite3.ErrReadonlyRollback:
			// A hot journal, not a permission: pipeline.ReadStable says
			// so with ErrNeedsRecovery.
			return fmt.Errorf("open %s: %w", path, err)
		case se.Code == sqlite3.ErrNotADB:
			return fmt.Errorf("%s is not a SQLite database (nothing changed): %w", path, err)
		case se.Code == sqlite3.ErrReadonly:
			return fmt.Errorf("%s: permission denied, the database is read-only (nothing changed): %w", path, err)
		case se.Code == sqlite3.ErrCantOpen, se.Code == sqlite3.ErrPerm:
			return fmt.Errorf("%s: permission denied or unreadable (nothing changed): %w", path, err)
		}
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// prepareCreate checks that a missing database file at path can be
// created, and says why not: a missing parent directory and a directory
// this process cannot write are different problems.
func prepareCreate(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot create %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("cannot create %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot create %s: %s is not a directory", path, dir)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("cannot create %s: permission denied in directory %s", path, dir)
		}
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	return f.Close()
}

// newUpDoc returns up's document for database db, before anything is read.
func newUpDoc(db string) *upDoc {
	return &upDoc{docHeader: docHeader{Command: "up", DB: db}, Applied: []string{},
		verifyFields: verifyFields{Differences: []pipeline.Difference{}, History: []pipeline.HistoryDrift{}}}
}

// upDoc is up's JSON document.
type upDoc struct {
	docHeader        // command "up"
	Created   bool   `json:"created"` // up created the file
	Current   string `json:"current"` // the version found ("" for an empty database)
	// Applied lists the versions up applied, oldest first.
	Applied []string `json:"applied"`
	verifyFields
}

func cmdUp(ctx context.Context, env *cmdEnv) (err error) {
	doc := newUpDoc(env.db)
	env.doc = doc
	defer func() {
		if current := doc.report(env.text(), err); current != "" {
			doc.Current = current
		}
	}()
	path, m, err := env.target()
	if err != nil {
		return err
	}
	w := env.text()
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory, not a database file", path)
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return statErr
	case statErr != nil:
		if err := danglingLink(path); err != nil {
			return err
		}
	}
	created := statErr != nil
	// Nothing to do is success, without a write: a database at head is
	// checked through a read-only open first, so a read-only file or
	// directory at head passes. verified is set once that check has
	// verified the database (verifyBeforeUp) under up's lock: one at head
	// but not yet in WAL mode is not verified a second time.
	verified := false
	upToDate := func() (bool, error) {
		if created || fi.Size() == 0 {
			return false, nil
		}
		current, wal, err := atHead(ctx, env, m, path)
		if errors.Is(err, pipeline.ErrNeedsRecovery) {
			// The read-write open recovers it; verified there.
			return false, nil
		}
		if err != nil || current == "" {
			return false, err
		}
		verified = true
		if !wal {
			return false, nil // up switches it to WAL
		}
		doc.Current = current
		fmt.Fprintf(w, "already at version %s\n", m.Head())
		return true, nil
	}
	if created {
		if err := prepareCreate(path); err != nil {
			return err
		}
		doc.Created = true
		fmt.Fprintf(w, "creating new database %s\n", path)
	} else if fi.Size() == 0 {
		fmt.Fprintf(w, "%s is an empty file: creating the database in it\n", path)
	}

	// up writes: it holds the database file's writer lock, as an open
	// store does, and refuses a file an application has open.
	lockPath := dblock.Path(path)
	_, lockErr := os.Stat(lockPath)
	lockCreated := errors.Is(lockErr, fs.ErrNotExist)
	lock, err := acquireUpLock(ctx, path, env.lockTimeout)
	if errors.Is(err, dblock.ErrHeld) {
		// Nothing to apply needs no lock: a database at head beside a
		// live store is success, read read-only.
		if done, uerr := upToDate(); uerr != nil || done {
			return uerr
		}
		// Otherwise the holder's file it is, even if up created it a
		// moment ago.
		return heldError(path, err, env.lockTimeout)
	}
	if err != nil {
		if created {
			os.Remove(path)
		} else if done, uerr := upToDate(); uerr != nil || done {
			// The lock file cannot be made (a read-only directory), but
			// there is nothing to write.
			return uerr
		}
		return err
	}
	conn, err := sql.Open("sqlite3", createDSN(path))
	if err != nil {
		lock.Release()
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
		if lockCreated {
			// up leaves nothing of its own beside the database. Removed
			// while still held, after the last write: an opener that found
			// the file before is refused, one that comes after makes a new
			// one.
			os.Remove(lockPath)
		} else {
			lock.SetNote("")
		}
		lock.Release()
	}()
	if done, err := upToDate(); err != nil || done {
		return err
	}
	if err := checkDatabase(conn, path); err != nil {
		return err
	}
	if !verified {
		if err := verifyBeforeUp(ctx, env, m, conn, path); err != nil {
			return err
		}
	}
	st, err := m.Status(ctx, conn)
	if err != nil {
		return err
	}
	doc.Current = st.Current

	applied, err := m.Up(ctx, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) && se.Code == sqlite3.ErrReadonly {
			return explainOpen(path, err)
		}
		return err
	}
	// The client runs its database in WAL mode. Set only now, so that a
	// refused database is left exactly as it was found.
	if _, err := conn.ExecContext(ctx, "PRAGMA journal_mode = WAL"); err != nil {
		return fmt.Errorf("set WAL journal mode: %w", err)
	}
	doc.Applied = nonNil(applied)
	if len(applied) == 0 {
		fmt.Fprintf(w, "already at version %s\n", m.Head())
		return nil
	}
	fmt.Fprintf(w, "applied: %s\n", strings.Join(applied, " "))
	fmt.Fprintf(w, "now at version %s\n", m.Head())
	return nil
}

// upLockNote is what up writes in the lock file while it holds the
// writer lock (dblock.Lock.SetNote), with its process id, so that a
// second up can tell it from an application.
const upLockNote = "migrate up pid %d\n"

// acquireUpLock takes the writer lock of the database file at path,
// waiting up to timeout while another writer holds it, and notes up as
// its holder. It returns an error wrapping dblock.ErrHeld if the lock is
// still held when timeout has passed (at once for 0).
func acquireUpLock(ctx context.Context, path string, timeout time.Duration) (*dblock.Lock, error) {
	deadline := time.Now().Add(timeout)
	for {
		lock, err := dblock.Acquire(path)
		if err == nil {
			if err := lock.SetNote(fmt.Sprintf(upLockNote, os.Getpid())); err != nil {
				lock.Release()
				return nil, err
			}
			return lock, nil
		}
		left := time.Until(deadline)
		if !errors.Is(err, dblock.ErrHeld) || left <= 0 {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
}

// heldError says who holds the writer lock of the database file at path
// that up could not take (err wraps dblock.ErrHeld): another up, if the
// lock file names a running one, otherwise an application.
func heldError(path string, err error, waited time.Duration) error {
	after := ""
	if waited > 0 {
		after = fmt.Sprintf(" after waiting %s", waited)
	}
	var pid int
	if _, serr := fmt.Sscanf(dblock.Note(path), upLockNote, &pid); serr == nil && running(pid) {
		return fmt.Errorf("another migrate up (pid %d) holds the writer lock of %s (%w)%s: nothing changed; run up again when it is done, or wait with -lock-timeout", pid, path, err, after)
	}
	return fmt.Errorf("%s is open in an application (%w)%s: close it and run up again, or wait with -lock-timeout; nothing changed", path, err, after)
}

// running reports whether a process with id pid exists (false where
// signals cannot tell).
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// atHead reads the database at path read-only (readExisting) and returns
// its version when it is at m's head with no out-of-order file and no
// drift from what its history says (verifyBeforeUp, whose finding it
// returns), and whether it is in WAL mode: up has nothing to do when it
// is. It returns "" when up has migrations to run.
func atHead(ctx context.Context, env *cmdEnv, m *migration.Migrator, path string) (current string, wal bool, err error) {
	err = env.readExisting(ctx, path, func(conn *sql.DB) error {
		current = ""
		st, err := m.Status(ctx, conn)
		if err != nil || st.Current != m.Head() || len(st.Pending) > 0 || len(st.OutOfOrder) > 0 {
			return nil // up places the database and says why it cannot
		}
		if err := verifyBeforeUp(ctx, env, m, conn, path); err != nil {
			return err
		}
		current = st.Current
		return nil
	})
	if err != nil || current == "" {
		return "", false, err
	}
	// The header's read and write versions are 2 in WAL mode.
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var header [20]byte
	if _, err := io.ReadFull(f, header[:]); err != nil || header[18] != 2 || header[19] != 2 {
		return current, false, nil
	}
	return current, true, nil
}

// refuseUnknownObjects refuses, as a finding, a database holding schema
// objects no migration defines (migration.Migrator.UnknownObjects, the
// check sqlitestore.Open makes), each printed on stdout; nothing is
// changed.
func refuseUnknownObjects(ctx context.Context, env *cmdEnv, m *migration.Migrator, conn *sql.DB, path string) error {
	objs, err := m.UnknownObjects(ctx, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) {
			return explainOpen(path, err)
		}
		return err
	}
	if len(objs) == 0 {
		return nil
	}
	w := env.text()
	fmt.Fprintf(w, "-- %s holds %d schema object(s) no migration defines (the store refuses to open it): nothing applied\n", path, len(objs))
	for _, o := range objs {
		fmt.Fprintf(w, "-- %s\n", o)
	}
	return findingf("%s holds %d schema object(s) no migration defines; nothing applied", path, len(objs))
}

// verifyBeforeUp refuses, as a finding, a database holding schema objects
// no migration defines (refuseUnknownObjects) or whose schema or history
// is not what its history says (pipeline.Verify; a *refusal): up would
// build on a schema it does not know, or adopt a legacy baseline that is
// not the version-14 schema. Nothing is changed. up and plan both run it,
// so that they agree.
func verifyBeforeUp(ctx context.Context, env *cmdEnv, m *migration.Migrator, conn *sql.DB, path string) error {
	d, err := pipeline.Verify(ctx, m, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) {
			return explainOpen(path, err)
		}
		return err
	}
	if err := refuseUnknownObjects(ctx, env, m, conn, path); err != nil {
		return err
	}
	if d.Empty() {
		return nil
	}
	st, err := m.Status(ctx, conn)
	if err != nil {
		return err
	}
	return &refusal{
		finding: finding{msg: fmt.Sprintf("%s is not what its history says (version %s): %d schema difference(s), %d history row(s); up refuses it, nothing applied",
			path, st.Current, schemaDifferences(d), len(d.History))},
		path: path, current: st.Current, d: d,
	}
}

// schemaDifferences counts d's schema differences, not the statements
// that would fix them (a table rebuild is several).
func schemaDifferences(d pipeline.Differences) int {
	if len(d.Found) == 0 && len(d.Schema) > 0 {
		return 1
	}
	return len(d.Found)
}

// refusal is verifyBeforeUp's finding: the database at path, at version
// current by its history, differs from what that history says by d.
type refusal struct {
	finding
	path, current string
	d             pipeline.Differences
}

func (r *refusal) Unwrap() error { return &r.finding }

// verifyFields are the differences verifyBeforeUp found, in up's and
// plan's JSON documents (empty when it found none).
type verifyFields struct {
	// Differences lists each schema difference from what the database's
	// history says, in words.
	Differences []pipeline.Difference `json:"differences"`
	// History lists the schema_revision rows that disagree with the
	// migration directory.
	History []pipeline.HistoryDrift `json:"history"`
}

// report fills v from a refusal in err, and prints its differences on w,
// one a line; it returns the version the refusal found, "" without one.
func (v *verifyFields) report(w io.Writer, err error) (current string) {
	var r *refusal
	if !errors.As(err, &r) {
		return ""
	}
	v.Differences, v.History = nonNil(r.d.Found), nonNil(r.d.History)
	fmt.Fprintf(w, "-- %s is not what its history says it is (version %s): up refuses it, nothing applied\n", r.path, r.current)
	for _, f := range r.d.Found {
		fmt.Fprintf(w, "-- %s\n", strings.Replace(f.String(), "at head", "at version "+r.current, 1))
	}
	if len(r.d.Found) == 0 && len(r.d.Schema) > 0 {
		fmt.Fprintf(w, "-- the schema differs (run drift for the SQL)\n")
	}
	for _, h := range r.d.History {
		fmt.Fprintf(w, "-- %s\n", h)
	}
	return r.current
}

// newStatusDoc returns status's document for database db, before
// anything is read.
func newStatusDoc(db string) *statusDoc {
	return &statusDoc{docHeader: docHeader{Command: "status", DB: db}, Pending: []string{}, OutOfOrder: []string{}}
}

// statusDoc is status's JSON document.
type statusDoc struct {
	docHeader        // command "status"
	Current   string `json:"current"` // "" for an empty database
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
// version (migration.ErrOutOfOrder), nil if there is none.
func outOfOrder(st migration.Status) error {
	if len(st.OutOfOrder) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s at or below version %s, not in its history: up refuses to run; give it a version above %s",
		migration.ErrOutOfOrder, strings.Join(st.OutOfOrder, ", "), st.Current, st.Current)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
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
	if len(st.OutOfOrder) > 0 {
		fmt.Fprintf(w, "out of order: %s (at or below the current version, not in its history: up refuses to run)\n", strings.Join(st.OutOfOrder, " "))
	}
}

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
	defer func() {
		if current := doc.report(env.text(), err); current != "" {
			doc.Current = current
		}
	}()
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
		// Plan against an empty in-memory database; create nothing.
		conn, err := pipeline.OpenMemory(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		err = read(conn)
	case statErr != nil:
		return statErr
	default:
		err = env.readExisting(ctx, path, read)
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
	current := st.Current
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
		fmt.Fprintf(env.stdout, "\n-- version %s: %s (%d %s)\n", f.Version, f.Description, len(f.Statements), n)
		for _, s := range f.Statements {
			s = strings.TrimSpace(s)
			if !strings.HasSuffix(s, ";") {
				s += ";"
			}
			fmt.Fprintln(env.stdout, s)
		}
	}
	return pending(versions)
}
