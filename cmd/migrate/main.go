// Command migrate is what a pipeline (and a developer) runs against the
// client database's schema history: it applies the migration directory
// (the checkout's, or outside one the copy embedded in package schema;
// verified against its atlas.sum), reports where a database stands and how it drifted from head, shows what would run,
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
//	migrate fixture-test [-dir DIR] [-fixtures DIR] [-require-head] [-json | -format F]
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
// -json writes one JSON document on stdout (shapes in the pipeline guide,
// cmd/migrate/README.md). -format github or gcc makes lint, drift and fixture-test
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
// Every command exits 0 when clean, 1 on a finding and 2 on an error,
// like diff; "migrate -h" lists what each covers (exitCodes). A pipeline
// runs a built binary (or go tool): go run reports every non-zero exit
// as 1. A non-zero exit prints one line, "migrate: command: reason", on stderr
// and leaves the database as it found it; with -json the document keeps
// every field of a success and adds "error".
//
// Every command reads the migration directory -dir names; without it,
// inside a checkout of the module, the checkout's schema/migrations as it
// is on disk (its atlas.sum and declarations included, whatever the binary
// was built with), and only outside a checkout the directory embedded in
// the binary. Each run says which, and its head: first on stderr in text
// ("migrate: migrations schema/migrations, head 15"), as "migrations"
// and "head" in its JSON document. hash, and the default outputs of
// plans, schema-doc, freeze and fixture-test's fixtures, are the
// repository's files, found from any directory of the checkout.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/schema"
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
	return errors.As(err, &f) || errors.Is(err, schema.ErrOutOfOrder)
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
	requireHead    bool          // -require-head (fixture-test)
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
	// checkout returns the checkout's migration directory on disk, which
	// a command reads unless -dir names another: checkoutDir, replaced by
	// tests that run the embedded directory as outside a checkout.
	checkout func() (string, error)
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
		name: "verify", args: "-db FILE [-dir DIR] [-json]", summary: "check that every index of FILE holds exactly its table's rows (read only; reads every page); exit 1 on a problem",
		flags: withJSON(withDir(dbFlag("existing database `FILE`"))), run: cmdVerify, doc: docOf(newVerifyDoc),
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
		name: "fixture-test", args: "[-dir DIR] [-fixtures DIR] [-require-head] [-json | -format F]", summary: "migrate a temporary copy of every frozen fixtures/versionNN to head and check it",
		flags: withFormat(withJSON(func(fs *flag.FlagSet, env *cmdEnv) {
			dirFlag(fs, env)
			fs.StringVar(&env.fixtures, "fixtures", "", "`DIR` holding the versionNN fixture directories (default: fixtures in the repository)")
			fs.BoolVar(&env.requireHead, "require-head", false, "also fail when no fixture is frozen at head (a skipped freeze), as CI runs it")
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
		fs.BoolVar(&env.json, "json", false, "write one JSON document on stdout instead of text (shape: see cmd/migrate/README.md)")
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
	if env.checkout == nil {
		env.checkout = checkoutDir
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
		if wantsJSON {
			env.emit(newHelpDoc(commands))
			return exitOK
		}
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
		if wantsJSON && slices.ContainsFunc(args[1:], isHelpFlag) {
			return // help's JSON document says it
		}
		fmt.Fprintf(fset.Output(), "usage: migrate %s %s\n\n%s.\n\n", cmd.name, cmd.args, cmd.summary)
		fset.PrintDefaults()
		fmt.Fprintf(fset.Output(), "\n%s", exitCodes)
	}
	if cmd.flags != nil {
		cmd.flags(fset, env)
	}
	if err := fset.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if wantsJSON {
				env.emit(newHelpDoc([]*command{cmd}))
			}
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
		fmt.Fprintf(stderr, "migrate %s: %s\n", cmd.name, escapeText(ue.msg))
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
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cmd.name, escapeText(oneLine(describe(err))))
		return exitFinding
	default:
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cmd.name, escapeText(oneLine(describe(err))))
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

// isHelpFlag reports whether a command-line argument asks for help.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
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
     database it cannot place or that needs recovery, no stable snapshot
     read beside a writer, the writer lock held (up)
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

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
